"""Preemption on a deterministic continuous-batching engine (engines.sim.step_decoder): service is
charged while a call runs, so a long call is demoted mid-run; a waiting call of a better queue
preempts it when the admission budget is full; the preempted call resumes from the tokens it had
decoded and returns the same output as an uninterrupted run; FCFS never preempts."""
from __future__ import annotations

import asyncio

import pytest

from engines.sim.step_decoder import StepDecoder
from teola.ir.engine_spec import Engine
from teola.api.program import Program
from teola.runtime import Runtime
from tests.support.waiting import until


def runtime(policy: str, budget: int, **options) -> tuple[Runtime, StepDecoder]:
    engine = StepDecoder("llm", step=0.005, max_efficient_batch=budget)
    opts = {policy: {"base_quantum": 4, "beta": None, "rerank_every": 1, **options}} if policy != "fifo" else {}
    rt = Runtime({"llm": Engine("llm", kind="vllm", model="m", max_efficient_batch=budget)}, {"llm": engine},
                 policy=policy, policy_options=opts)
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
            return await asyncio.gather(*(prog.call(f"c{i}", parent_ids=[], max_tokens=max_tokens) for i in range(n)))
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


async def test_preemption_can_be_turned_off():
    rt, engine = runtime("mlfq", budget=1, preempt=False)
    await rt.start()
    try:
        async with Program(rt, "long") as a, Program(rt, "short") as b:
            long_call = asyncio.ensure_future(a.call("x", parent_ids=[], max_tokens=30))
            await until(lambda: engine.running == 1, timeout=10)
            assert rt.schedulers["llm"].preemptor is None
            await b.call("y", parent_ids=[], max_tokens=2)  # runs beside it (vLLM-style batching)
            assert (await long_call).result["text"] == expected(30)
    finally:
        await rt.stop()
    assert rt.metrics.preemptions == 0 and engine.aborted == []


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

    lent = Borrowed(StepDecoder("llm", step=0.005, max_efficient_batch=1))
    rt = Runtime({"llm": Engine("llm", kind="vllm", model="m", max_efficient_batch=1)}, {"llm": lent},
                 policy="mlfq", policy_options={"mlfq": {"base_quantum": 4, "beta": None, "rerank_every": 1}})
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

    from teola.runtime.metrics import Metrics
    from teola.runtime.engine_tier.preemption import Preemptor

    p = Preemptor(SimpleNamespace(metrics=Metrics()), budget=1)
    p.note_resumed({"aborted": True, "num_prompt_tokens": 90, "num_cached_tokens": 0, "num_output_tokens": 0})
    p.note_resumed({"aborted": True, "num_prompt_tokens": 90, "num_cached_tokens": 64, "num_output_tokens": 0})
    p.note_resumed({"aborted": True, "num_prompt_tokens": 80, "num_cached_tokens": 0, "num_output_tokens": 2})
    p.note_resumed({"num_prompt_tokens": 70, "num_cached_tokens": 32, "num_output_tokens": 5,
                    "kv_swap_loaded_tokens": 6})
    m = p.ctx.metrics
    assert m.resumed_unrun == 1
    assert (m.resumed_tokens, m.resumed_cached_tokens, m.resumed_swapped_tokens) == (240, 96, 6)
    assert m.snapshot()["resumed_unrun"] == 1
