"""Preemption on a deterministic continuous-batching engine (engines.sim.step_decoder): service is
charged while a call runs, so a long call is demoted mid-run; a waiting call of a better queue
preempts it when the admission budget is full; the preempted call resumes from the tokens it had
decoded and returns the same output as an uninterrupted run; FCFS never preempts."""

from __future__ import annotations

import asyncio

import pytest

from engines.sim.step_decoder import StepDecoder
from teola.api.program import Program
from teola.ir.engine_spec import Engine
from teola.runtime import Runtime
from tests.support.waiting import until


def runtime(policy: str, budget: int, **options) -> tuple[Runtime, StepDecoder]:
    """An engine whose capacity (max_batch, what admission fills) is `budget` calls."""
    engine = StepDecoder("llm", step=0.005, max_batch=budget, max_efficient_batch=budget)
    opts = (
        {policy: {"base_quantum": 4, "beta": None, "rerank_every": 1, "service": "tokens", **options}}
        if policy != "fifo"
        else {}
    )
    rt = Runtime(
        {"llm": Engine("llm", kind="vllm", model="m", max_efficient_batch=budget)},
        {"llm": engine},
        policy=policy,
        policy_options=opts,
    )
    return rt, engine


def expected(n: int) -> str:
    return "".join(f"t{k} " for k in range(n))


@pytest.mark.parametrize("policy", ["mlfq", "plas", "atlas"])
async def test_a_long_call_is_preempted_for_a_short_one_and_resumes_with_the_same_output(policy):
    rt, engine = runtime(policy, budget=1)
    await rt.start()
    try:
        async with Program(rt, "long") as long_prog, Program(rt, "short") as short_prog:
            long_call = asyncio.ensure_future(long_prog.call("write a lot", parent_ids=[], max_tokens=60))
            policy_obj = rt.schedulers["llm"].policy
            await until(lambda: any(st.level > 0 for st in policy_obj.core.calls.values()), timeout=10)
            # demoted while running: its service was charged as it streamed, before it finished
            assert not long_call.done()
            short = await short_prog.call("one line", parent_ids=[], max_tokens=3)
            assert not long_call.done(), "the short call should finish while the long one waits"
            assert short.result["text"] == expected(3)
            result = (await long_call).result
    finally:
        await rt.stop()
    assert result["text"] == expected(60) and result["output_token_ids"] == list(range(60))
    assert result["num_output_tokens"] == 60 and result["preemptions"] == len(result["resumed_at"]) >= 1
    assert all(0 < k < 60 for k in result["resumed_at"])
    assert rt.metrics.preemptions == result["preemptions"]
    assert rt.metrics.resumed_tokens > 0
    assert engine.peak == 1  # the admission budget held


async def run_calls(rt: Runtime, n: int, max_tokens: int) -> list:
    """n concurrent calls of one program, each decoding max_tokens tokens."""
    await rt.start()
    try:
        async with Program(rt, "p") as prog:
            return await asyncio.gather(
                *(prog.call(f"c{i}", parent_ids=[], max_tokens=max_tokens) for i in range(n))
            )
    finally:
        await rt.stop()


async def test_fcfs_never_preempts_and_admission_caps_running_calls():
    rt, engine = runtime("fifo", budget=2)
    results = await run_calls(rt, 5, 10)
    assert [r.result["text"] for r in results] == [expected(10)] * 5
    assert rt.metrics.preemptions == 0 and engine.aborted == []


async def test_admission_budget_bounds_running_calls_under_a_program_policy():
    rt, engine = runtime("plas", budget=2)
    results = await run_calls(rt, 6, 12)
    assert engine.peak == 2
    assert all(r.result["text"] == expected(12) for r in results)


async def test_preemption_can_be_turned_off_and_the_queues_still_admit():
    """preempt=False: the short call of a better queue waits for the long one (admission budget 1)
    instead of stopping it, and each call returns when it ends, through the same admission control."""
    rt, engine = runtime("mlfq", budget=1, preempt=False)
    await rt.start()
    ended: list[str] = []
    try:
        async with Program(rt, "long") as a, Program(rt, "short") as b:

            async def call(prog: Program, name: str, n: int) -> str:
                r = await prog.call(name, parent_ids=[], max_tokens=n)
                ended.append(name)
                return r.result["text"]

            long_call = asyncio.ensure_future(call(a, "x", 30))
            await until(lambda: engine.running == 1, timeout=10)
            assert rt.schedulers["llm"].preemptor is not None
            assert await call(b, "y", 2) == expected(2)
            assert await long_call == expected(30)
    finally:
        await rt.stop()
    assert ended == ["x", "y"] and engine.peak == 1
    assert rt.metrics.preemptions == 0 and engine.aborted == []


async def test_without_preemption_a_short_call_returns_while_a_long_one_beside_it_decodes():
    """preempt=False, budget 2: both calls are admitted together, and the 2-token one returns as soon
    as it ends while the 30-token one is still decoding (each call on its own stream), not when the
    longest call of their batch ends."""
    rt, engine = runtime("plas", budget=2, preempt=False)
    await rt.start()
    try:
        async with Program(rt, "long") as a, Program(rt, "short") as b:
            long_call = asyncio.ensure_future(a.call("x", parent_ids=[], max_tokens=30))
            short = await b.call("y", parent_ids=[], max_tokens=2)
            assert short.result["text"] == expected(2) and engine.running == 1 and not long_call.done()
            assert (await long_call).result["text"] == expected(30)
    finally:
        await rt.stop()
    assert engine.peak == 2 and rt.metrics.preemptions == 0


async def test_a_cancelled_running_program_call_is_aborted_in_the_engine():
    rt, engine = runtime("plas", budget=2)
    await rt.start()
    try:
        async with Program(rt, "p") as prog:
            call = asyncio.ensure_future(prog.call("long", parent_ids=[], max_tokens=400))
            await until(lambda: engine.running == 1, timeout=10)
            call.cancel()
            await until(lambda: engine.running == 0, timeout=10)
            assert len(engine.aborted) == 1 and engine.aborted[0].startswith("llm:call")
            assert engine.finished == []
            assert (await prog.call("next", parent_ids=[], max_tokens=3)).result["text"] == expected(3)
    finally:
        await rt.stop()
    assert rt.metrics.aborted_requests == 1 and rt.metrics.preemptions == 0


@pytest.mark.parametrize("beta", [None, 0.02])
def test_a_starved_long_call_is_promoted_and_preempts_a_stream_of_short_ones(beta):
    """Two feeders keep a short call always waiting; the long call, demoted while it ran, waits in
    a low queue. Without anti-starvation it finishes only after every short call; with beta (seconds
    waited per decoded token) it is promoted to the top queue again and again (each time it runs
    a quantum, is demoted and preempted) and finishes while short calls are still coming.
    On the virtual clock, so the schedule is exact."""
    from teola.sim.virtual_loop import run_virtual

    async def main() -> tuple[list[str], int]:
        rt, engine = runtime("mlfq", budget=1, beta=beta)
        await rt.start()
        done: list[str] = []
        try:
            async with Program(rt, "hog") as hog:
                long_call = asyncio.ensure_future(hog.call("long", parent_ids=[], max_tokens=60))
                long_call.add_done_callback(lambda _: done.append("long"))
                await asyncio.sleep(0.05)  # it runs 10 tokens: past its quantum, demoted

                async def feeder(k: int) -> None:
                    for i in range(40):
                        async with Program(rt, f"short{k}.{i}") as p:
                            await p.call(f"s{k}.{i}", parent_ids=[], max_tokens=3)
                        done.append("short")

                await asyncio.gather(feeder(0), feeder(1), long_call)
                assert (await long_call).result["text"] == expected(60)
        finally:
            await rt.stop()
        return done, rt.metrics.preemptions

    done, preemptions = run_virtual(main())
    assert done.count("short") == 80
    if beta is None:
        assert done[-1] == "long"
    else:
        assert done.index("long") < 79 and preemptions >= 1


async def test_a_call_keeps_one_kv_swap_key_across_its_resumes():
    from tests.support.borrowed import Borrowed

    lent = Borrowed(StepDecoder("llm", step=0.005, max_batch=1, max_efficient_batch=1))
    rt = Runtime(
        {"llm": Engine("llm", kind="vllm", model="m", max_efficient_batch=1)},
        {"llm": lent},
        policy="mlfq",
        policy_options={"mlfq": {"base_quantum": 4, "beta": None, "rerank_every": 1, "service": "tokens"}},
    )
    await rt.start()
    try:
        async with Program(rt, "long") as long_prog, Program(rt, "short") as short_prog:
            long_call = asyncio.ensure_future(long_prog.call("write a lot", parent_ids=[], max_tokens=60))
            core = rt.schedulers["llm"].policy.core
            await until(lambda: any(st.level > 0 for st in core.calls.values()), timeout=10)
            await short_prog.call("one line", parent_ids=[], max_tokens=3)
            result = (await long_call).result
    finally:
        await rt.stop()
    runs = [r for r in lent.requests if "write a lot" in str(r["parts"])]
    assert result["preemptions"] >= 1 and len(runs) == result["preemptions"] + 1
    assert len({r["kv_swap_key"] for r in runs}) == 1 and runs[-1]["resume_ids"]
    short = [r for r in lent.requests if "one line" in str(r["parts"])]
    assert short and short[0]["kv_swap_key"] != runs[0]["kv_swap_key"]


def test_a_resumed_run_stopped_before_it_ran_counts_apart_from_re_sent_tokens():
    """A resumed call admitted and preempted again while it still waited inside the engine computed
    nothing: its prompt is not counted as re-sent (nor, by difference, as recomputed)."""
    from types import SimpleNamespace

    from teola.runtime.engine_tier.preemption import Preemptor
    from teola.runtime.metrics import Metrics

    p = Preemptor(SimpleNamespace(metrics=Metrics()), budget=1)
    p.note_resumed({"aborted": True, "num_prompt_tokens": 90, "num_cached_tokens": 0, "num_output_tokens": 0})
    p.note_resumed(
        {"aborted": True, "num_prompt_tokens": 90, "num_cached_tokens": 64, "num_output_tokens": 0}
    )
    p.note_resumed({"aborted": True, "num_prompt_tokens": 80, "num_cached_tokens": 0, "num_output_tokens": 2})
    p.note_resumed(
        {"num_prompt_tokens": 70, "num_cached_tokens": 32, "num_output_tokens": 5, "kv_swap_loaded_tokens": 6}
    )
    m = p.ctx.metrics
    assert m.resumed_unrun == 1
    assert (m.resumed_tokens, m.resumed_cached_tokens, m.resumed_swapped_tokens) == (240, 96, 6)
    assert m.snapshot()["resumed_unrun"] == 1


async def test_seconds_service_preempts_a_long_call_for_a_short_one():
    """issue 62: with Autellix's own service unit (engine seconds) a running call is charged its
    time as it decodes, demoted past its quantum (0.02 s = 4 steps of 5 ms) and preempted."""
    rt, engine = runtime("mlfq", budget=1, service="seconds", base_quantum=0.02)
    await rt.start()
    try:
        assert rt.schedulers["llm"].preemptor is not None
        async with Program(rt, "long") as long_prog, Program(rt, "short") as short_prog:
            long_call = asyncio.ensure_future(long_prog.call("write a lot", parent_ids=[], max_tokens=60))
            core = rt.schedulers["llm"].policy.core
            await until(lambda: any(st.level > 0 for st in core.calls.values()), timeout=10)
            short = await short_prog.call("one line", parent_ids=[], max_tokens=3)
            assert not long_call.done(), "the short call should finish while the long one waits"
            assert short.result["text"] == expected(3)
            result = (await long_call).result
    finally:
        await rt.stop()
    assert result["text"] == expected(60) and result["preemptions"] >= 1
    assert engine.peak == 1


def capacity_runtime(admission: str = "capacity", token_budget: int = 0) -> tuple[Runtime, StepDecoder]:
    """An engine that holds 4 calls at once (max_batch) but batches efficiently only 2."""
    engine = StepDecoder("llm", step=0.005, max_batch=4, max_efficient_batch=2)
    spec = Engine(
        "llm", kind="vllm", model="m", max_efficient_batch=2, token_budget=token_budget, admission=admission
    )
    return Runtime(
        {"llm": spec},
        {"llm": engine},
        policy="plas",
        policy_options={"plas": {"beta": None, "service": "tokens"}},
    ), engine


async def test_admission_fills_the_engines_capacity_not_its_efficient_batch():
    """issue 62: the engine admits what it holds (vLLM: max_num_seqs), as Autellix's engine does;
    the old cap is the named option admission="efficient_batch"."""
    rt, engine = capacity_runtime()
    assert all(r.result["text"] == expected(12) for r in await run_calls(rt, 6, 12))
    assert engine.peak == 4
    rt, engine = capacity_runtime(admission="efficient_batch")
    await run_calls(rt, 6, 12)
    assert engine.peak == 2


async def test_admission_stops_while_running_calls_fill_the_kv_token_budget():
    """Each call holds an estimated 13 tokens (prompt "cN": 2 chars // 4 + 1 = 1, plus its 12-token
    output budget); a 13-token budget holds one call, so one runs at a time of the 4 slots. Before,
    an instance whose budget was full still took one more call per scheduling round."""
    rt, engine = capacity_runtime(token_budget=13)
    assert all(r.result["text"] == expected(12) for r in await run_calls(rt, 6, 12))
    assert engine.peak == 1


class CancellingDecoder(StepDecoder):
    """A StepDecoder with the adapter's `cancel(owners, kv_keys)` (vLLM: tell the KV connector not to
    save these calls, then abort them) and `forget_kv`, recording what it was asked."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.cancelled: list[tuple[list[str], list[str]]] = []
        self.forgotten: list[str] = []

    async def cancel(self, owners: list[str], kv_keys: list[str]) -> int:
        self.cancelled.append((list(owners), list(kv_keys)))
        return await self.abort(owners)

    async def forget_kv(self, kv_keys: list[str]) -> None:
        self.forgotten.extend(kv_keys)


async def test_a_call_cancelled_by_its_client_is_cancelled_with_its_kv_key_not_just_aborted():
    """issue 62: a call whose caller went away never resumes, so the engine is told its KV swap key
    (a kv_swap vLLM then saves nothing for it) instead of aborting it like a preempted call."""
    engine = CancellingDecoder("llm", step=0.005, max_batch=2, max_efficient_batch=2)
    rt = Runtime(
        {"llm": Engine("llm", kind="vllm", model="m")},
        {"llm": engine},
        policy="plas",
        policy_options={"plas": {"beta": None, "service": "tokens"}},
    )
    await rt.start()
    try:
        async with Program(rt, "p") as prog:
            call = asyncio.ensure_future(prog.call("long", parent_ids=[], max_tokens=400))
            await until(lambda: engine.running == 1, timeout=10)
            call.cancel()
            await until(lambda: engine.running == 0, timeout=10)
    finally:
        await rt.stop()
    assert len(engine.cancelled) == 1
    (tags,), (keys,) = engine.cancelled[0]
    assert tags.startswith("llm:call") and keys == tags  # the key the preemptor gave it at its first run
    assert rt.metrics.preemptions == 0


def test_a_withdrawn_preempted_call_has_its_saved_kv_dropped():
    """A preempted call waiting to resume is withdrawn (its query ended): the engines drop the KV
    they saved for it under its swap key."""
    from types import SimpleNamespace

    from teola.runtime.engine_tier.preemption import Preemptor, Resume

    asked: list = []

    async def call(inst, method, *args):
        asked.append((inst, method, args))

    from engines.protocol import Capability

    p = Preemptor(SimpleNamespace(executor=SimpleNamespace(call=call), spawn=asyncio.run), budget=1)
    i0, i1 = (SimpleNamespace(capabilities={Capability.FORGET_KV}) for _ in range(2))
    entry = object()
    p.resumes[entry] = [Resume(request={"kv_swap_key": "llm:call3", "max_tokens": 9}, ids=[1, 2], count=1)]
    p.forget(entry, [i0, i1])
    assert asked == [(i0, "forget_kv", (["llm:call3"],)), (i1, "forget_kv", (["llm:call3"],))]
    assert entry not in p.resumes
