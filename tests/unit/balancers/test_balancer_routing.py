"""Per-call routing over several engine instances (Autellix Algorithm 2) wired into the engine
scheduler: the engine spec's `balancer` option, on deterministic simulated engines."""

from __future__ import annotations

import asyncio

import pytest

from engines.sim.sim_engine import SimEngine
from teola import Engine
from teola.api.program import Program
from teola.runtime import Runtime
from tests.support.waiting import until
from tests.unit.runtime.test_runtime import QUERY, make_rag

SHORT = "hi"  # 1 estimated prompt token
LONG = "context " * 100  # ~200 estimated prompt tokens, over the threshold below
THRESHOLD = 50


def two_instances(balancer: str, policy: str = "plas", latency: float = 0.02, **options) -> Runtime:
    sims = [SimEngine(f"llm{i}", latency={1: latency}) for i in range(2)]
    spec = Engine("llm", kind="vllm", instances=2, balancer=balancer, **options)
    return Runtime(
        {"llm": spec},
        {"llm": sims},
        policy=policy,
        policy_options={policy: {"beta": None}} if policy in ("plas", "atlas", "mlfq") else None,
    )


async def call(rt: Runtime, pid: str, prompt: str) -> str:
    async with Program(rt, pid) as prog:
        return (await prog.call(prompt, max_tokens=4)).instance


async def test_short_calls_spread_to_the_least_used_instance():
    rt = two_instances("locality", balancer_options={"threshold": THRESHOLD})
    await rt.start()
    try:
        places = await asyncio.gather(*(call(rt, f"p{i}", SHORT) for i in range(4)))
        # routed on arrival, each to the instance with fewer requests queued or in flight
        assert places == ["llm/0", "llm/1", "llm/0", "llm/1"]
    finally:
        await rt.stop()


async def test_long_calls_of_a_program_stay_on_its_instance():
    rt = two_instances("locality", balancer_options={"threshold": THRESHOLD})
    await rt.start()
    sched = rt.schedulers["llm"]
    try:
        async with Program(rt, "P") as prog:
            first = await prog.call(LONG, max_tokens=4)
            assert sched.balancer.table.engine_of("P").name == first.instance
            # load the pinned instance with other programs' long calls pinned there too: P's next
            # long calls still go to it, while a short call of P goes to the less used instance
            pinned = sched.balancer.table.engine_of("P")
            for i in range(3):
                sched.balancer.table.assign_engine(f"busy{i}", pinned)
            busy = [asyncio.ensure_future(call(rt, f"busy{i}", LONG)) for i in range(3)]
            await until(lambda: sched.load(pinned) == 3)  # the busy calls are queued on the pinned instance
            long_, short = await asyncio.gather(
                prog.call(LONG + "!", max_tokens=4), prog.call(SHORT, max_tokens=4)
            )
            later = [await prog.call(LONG + str(i), max_tokens=4) for i in range(3)]
            assert {r.instance for r in [long_, *later]} == {first.instance}
            assert set(await asyncio.gather(*busy)) == {first.instance}
            assert short.instance != first.instance
        assert "P" not in sched.balancer.table  # the pin went with the program
    finally:
        await rt.stop()


async def test_least_used_moves_a_long_program_off_a_busy_instance():
    rt = two_instances("least_used")
    await rt.start()
    try:
        async with Program(rt, "P") as prog:
            first = await prog.call(LONG, max_tokens=4)
            others = [asyncio.ensure_future(call(rt, f"q{i}", LONG)) for i in range(3)]
            sched = rt.schedulers["llm"]
            await until(
                lambda: [sched.load(i) for i in sched.instances] == [2, 1]
            )  # routed: llm/0, llm/1, llm/0
            nxt = await prog.call(LONG, max_tokens=4)
            assert await asyncio.gather(*others) == ["llm/0", "llm/1", "llm/0"]
        assert (first.instance, nxt.instance) == ("llm/0", "llm/1")  # locality would have kept llm/0
    finally:
        await rt.stop()


async def test_round_robin_cycles_whatever_the_load():
    rt = two_instances("round_robin", latency=0.0)
    await rt.start()
    try:
        async with Program(rt, "P") as prog:
            places = [(await prog.call(LONG, max_tokens=4)).instance for _ in range(5)]
        assert places == ["llm/0", "llm/1", "llm/0", "llm/1", "llm/0"]
    finally:
        await rt.stop()


@pytest.mark.parametrize("policy", ["plas", "atlas", "fifo"])
async def test_pins_are_dropped_when_the_program_ends(policy):
    rt = two_instances("locality", policy=policy, balancer_options={"threshold": THRESHOLD})
    await rt.start()
    sched = rt.schedulers["llm"]
    try:
        table = getattr(sched.policy, "table", None)
        if table is not None:  # program-aware policies share their process table
            assert sched.balancer.table is table
        prog = Program(rt, "P")
        await prog.call(LONG, max_tokens=4)
        assert sched.balancer.table.engine_of("P") is not None
        await prog.end()
        assert sched.balancer.table.engine_of("P") is None and "P" not in sched.balancer.table
    finally:
        await rt.stop()


async def test_policy_switch_keeps_sharing_the_process_table():
    rt = two_instances("locality", policy="fifo", balancer_options={"threshold": THRESHOLD})
    await rt.start()
    try:
        rt.set_policy("atlas")
        sched = rt.schedulers["llm"]
        assert sched.balancer.table is sched.policy.table
    finally:
        await rt.stop()


async def test_queries_route_through_the_graph_scheduler_and_release_their_pins():
    sims = {
        "llm": [SimEngine("llm0"), SimEngine("llm1")],
        "embedding": SimEngine("embedding"),
        "vectordb": SimEngine("vectordb"),
        "reranker": SimEngine("reranker"),
    }
    app = make_rag(sims, llm={"instances": 2, "balancer": "locality", "balancer_options": {"threshold": 0}})
    try:
        results = await asyncio.gather(*(app.run(QUERY, {"policy": "atlas"}) for _ in range(3)))
        assert all(r.output.startswith("answer ") for r in results)
        for r in results:  # threshold 0: every LLM call of a query is "long" -> one instance
            assert len({t["instance"] for t in r.trace if t["engine"] == "llm"}) == 1
        sched = app.runtime.schedulers["llm"]
        assert len(sched.balancer.table) == 0 and sched.queued() == 0
    finally:
        await app.stop()


def test_default_balancer_is_unchanged_and_unknown_names_fail():
    assert Engine("llm", kind="vllm").balancer == "least_loaded"
    with pytest.raises(
        ValueError, match="unknown balancer 'random'; known balancers: least_loaded, least_used"
    ):
        Engine("llm", kind="vllm", balancer="random")
    with pytest.raises(ValueError, match="unknown option"):
        Engine("llm", kind="vllm", balancer="locality", balancer_options={"treshold": 10})
    with pytest.raises(ValueError, match="takes no balancer_options"):
        Engine("llm", kind="vllm", balancer_options={"threshold": 10})
    with pytest.raises(ValueError, match="threshold"):
        Engine("llm", kind="vllm", balancer="locality", balancer_options={"threshold": -5})


async def test_default_scheduler_has_one_shared_queue():
    rt = Runtime({"llm": Engine("llm", kind="vllm", instances=2)}, {"llm": [SimEngine("a"), SimEngine("b")]})
    await rt.start()
    try:
        assert rt.schedulers["llm"].balancer is None and rt.schedulers["llm"].queues == {}
    finally:
        await rt.stop()
