"""Client programs on the real vLLM engine (SmolLM2-135M on CPU): program-aware policies see a
program's calls, and with two instances the locality balancer keeps a long-context program on one."""

import asyncio
import random

import pytest

from teola import Engine
from teola.api.program import Program
from teola.runtime import Runtime
from tests.support.borrowed import Borrowed

pytestmark = pytest.mark.engines


def document(n_facts: int = 40) -> str:
    """A context nobody sent before (~450 tokens), so the prefix cache cannot already hold it."""
    rng = random.Random()
    return " ".join(
        f"Record {rng.randrange(10**9)}: item {i} weighs {rng.randrange(1000)} grams." for i in range(n_facts)
    )


@pytest.mark.parametrize("policy", ["plas", "atlas"])
async def test_program_calls_run_under_program_aware_policy(llm_engine, policy):
    backend = Borrowed(llm_engine)
    rt = Runtime(
        {"llm": Engine("llm", kind="vllm")},
        {"llm": backend},
        policy=policy,
        policy_options={policy: {"base_quantum": 8, "beta": None, "service": "tokens"}},
    )
    await rt.start()
    pid = f"{policy}-session"
    try:
        table = rt.schedulers["llm"].policy.table
        async with Program(rt, pid) as prog:
            root = await prog.call("Name one fruit.", parent_ids=[], max_tokens=8, ignore_eos=True)
            kids = await asyncio.gather(
                *(
                    prog.call(
                        f"Describe {root.strip()} in {k} words.",
                        parent_ids=[root.call_id],
                        max_tokens=4,
                        ignore_eos=True,
                    )
                    for k in (2, 3)
                )
            )
            entry = table.get(pid)
            assert root.result["num_output_tokens"] == 8 and all(
                k.result["num_output_tokens"] == 4 for k in kids
            )
            assert entry.completed == 3
            # service is charged in decoded tokens: PLAS sums it, ATLAS follows the critical path
            assert (entry.service, entry.critical_path) == (16, 12)
        assert pid not in table
        # root: a new program, queue 0; children: priority 8 (PLAS: service so far; ATLAS: the
        # root's critical path) falls in queue 1 of (8, 16, ...), sent to vLLM as its priority
        assert [r["priority"] for r in backend.requests] == [0, 1, 1]
    finally:
        await rt.stop()


async def test_vllm_reports_executor_seconds_and_the_policy_charges_them(llm_engine):
    """Service in seconds (the default) on vLLM: each call's result carries its seconds in vLLM's
    running batch, at most its wall time, and the program is charged exactly their sum (the progress
    events' seconds, then the rest at the end), none charged from wall time."""
    rt = Runtime({"llm": Engine("llm", kind="vllm")}, {"llm": Borrowed(llm_engine)}, policy="plas")
    await rt.start()
    loop = asyncio.get_running_loop()
    try:
        policy = rt.schedulers["llm"].policy
        async with Program(rt, "executor-seconds") as prog:
            walls, executed = [], []
            for n in (6, 12):
                t0 = loop.time()
                r = await prog.call(f"Count to {n}.", parent_ids=[], max_tokens=n, ignore_eos=True)
                walls.append(loop.time() - t0)
                executed.append(r.result["executor_s"])
                assert r.result["queued_s"] >= 0.0
            service = policy.table.get("executor-seconds").service
        assert all(0.0 < x <= w for x, w in zip(executed, walls)), (executed, walls)
        assert service == pytest.approx(sum(executed), rel=1e-6)
        assert policy.charged_from == {"executor": 2, "wall": 0}
    finally:
        await rt.stop()


async def test_locality_keeps_a_long_context_program_on_one_instance(llm_pair):
    backends = [Borrowed(e) for e in llm_pair]
    spec = Engine("llm", kind="vllm", instances=2, balancer="locality", balancer_options={"threshold": 200})
    rt = Runtime({"llm": spec}, {"llm": backends}, policy="plas")
    await rt.start()

    async def short(i: int) -> str:
        async with Program(rt, f"short-{i}") as p:
            return (await p.call(f"Say the number {i}.", max_tokens=4, ignore_eos=True)).instance

    try:
        sched = rt.schedulers["llm"]
        async with Program(rt, "long") as prog:
            context = f"Document: {document()}\n"
            calls = []
            for turn in range(3):
                others = [asyncio.ensure_future(short(4 * turn + i)) for i in range(4)]
                r = await prog.call(
                    context + f"Question {turn}: what does item {turn} weigh?", max_tokens=6, ignore_eos=True
                )
                calls.append(r)
                context += f"Question {turn}: what does item {turn} weigh? Answer: {r.strip()}\n"
                short_places = await asyncio.gather(*others)
                assert set(short_places) == {"llm/0", "llm/1"}  # short calls spread over both
            assert sched.balancer.table.engine_of("long").name == calls[0].instance
        assert len({c.instance for c in calls}) == 1  # every long call on one instance
        assert calls[-1].result["num_cached_tokens"] >= 320  # ... which reused the document's KV blocks
        assert sched.balancer.table.engine_of("long") is None  # pin dropped with the program
    finally:
        await rt.stop()
