"""issue 62 on the real vLLM with teola's KV connector (kv_swap): a call cancelled by its client is
cancelled with its KV swap key (VLLMEngine.cancel), so the connector saves nothing for it, while a
call the policy preempts has its KV saved; a preempted batched call has each request's KV saved
under its own key. Swap costs are fixed (recomputing a token "costs" 1 s) so that every preempted
call's save pays and the connector's counters are exact. Its own engine, started once."""
import asyncio

import pytest
import pytest_asyncio

from engines.vllm.engine import VLLMEngine
from teola import Engine
from teola.api.program import Program
from teola.runtime import Runtime
from tests.support.borrowed import Borrowed
from tests.support.entry_work import decoding_entry
from tests.support.waiting import until

pytestmark = pytest.mark.engines

PROMPT = "Write a long story about a lighthouse keeper and the sea."


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def swap_engine():
    engine = VLLMEngine("llm-cancel", model="smollm2-135m-instruct", max_model_len=512, max_num_seqs=4,
                        kv_swap=True, kv_swap_bytes=64 << 20, kv_swap_costs={"prefill_s_per_token": 1.0})
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


def runtime(engine: VLLMEngine, slots: int) -> Runtime:
    return Runtime({"llm": Engine("llm", kind="vllm", max_efficient_batch=slots, max_batch=slots)},
                   {"llm": Borrowed(engine)}, policy="mlfq",
                   policy_options={"mlfq": {"base_quantum": 4, "beta": None, "rerank_every": 1, "service": "tokens"}})


async def settled_stats(engine: VLLMEngine) -> dict:
    """The connector's counters after one more engine step (they are reported as of the last one)."""
    await engine.execute("decoding", [{"parts": [["question", "Say yes."]], "max_tokens": 2, "ignore_eos": True}])
    return await engine.kv_swap_stats()


async def test_a_cancelled_call_saves_no_kv_while_a_preempted_one_does(swap_engine):
    rt = runtime(swap_engine, slots=1)
    await rt.start()
    try:
        sched = rt.schedulers["llm"]
        core = sched.policy.core
        before = await settled_stats(swap_engine)
        async with Program(rt, "gone") as gone:
            call = asyncio.ensure_future(gone.call(PROMPT, parent_ids=[], max_tokens=200, ignore_eos=True))
            await until(lambda: any(st.service >= 8 for st in core.calls.values()), timeout=120)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            await until(lambda: not any(sched.preemptor.calls.values()), timeout=60)
        cancelled = await settled_stats(swap_engine)
        # the abort found the key cancelled: nothing saved, nothing held in host memory
        assert cancelled["saves"] == before["saves"] and cancelled["saves_cancelled"] == before["saves_cancelled"] + 1
        assert cancelled["entries"] == before["entries"] and rt.metrics.aborted_requests == 1

        async with Program(rt, "long") as long_prog, Program(rt, "short") as short_prog:
            long_call = asyncio.ensure_future(long_prog.call(PROMPT, parent_ids=[], max_tokens=48, ignore_eos=True))
            await until(lambda: any(st.level > 0 for st in core.calls.values()), timeout=120)
            await short_prog.call("Say yes.", parent_ids=[], max_tokens=2, ignore_eos=True)
            result = (await long_call).result
        after = await settled_stats(swap_engine)
    finally:
        await rt.stop()
    assert result["preemptions"] >= 1 and result["num_output_tokens"] == 48
    # the preempted call's aborts saved its KV (the first run's at least: it had decoded tokens)
    assert after["saves"] - cancelled["saves"] >= 1 and after["saves_cancelled"] == cancelled["saves_cancelled"]


async def test_a_preempted_batched_call_saves_each_requests_kv_under_its_own_key(swap_engine):
    rt = runtime(swap_engine, slots=2)
    await rt.start()
    try:
        core = rt.schedulers["llm"].policy.core
        before = await settled_stats(swap_engine)
        requests = [{"parts": [["question", f"{PROMPT} Part {i}."]], "max_tokens": 40, "ignore_eos": True}
                    for i in range(2)]
        bulk, work = decoding_entry("bulk", requests, asyncio.get_running_loop().time())
        rt.schedulers["llm"].submit(bulk)
        await until(lambda: bulk in core.calls and core.calls[bulk].level > 0, timeout=120)
        async with Program(rt, "short") as short_prog:
            await short_prog.call("Say yes.", parent_ids=[], max_tokens=2, ignore_eos=True)
        await asyncio.wait_for(work.done.wait(), timeout=300)
        after = await settled_stats(swap_engine)
    finally:
        await rt.stop()
    results = work.out
    assert all(r["num_output_tokens"] == 40 and len(r["output_token_ids"]) == 40 for r in results)
    assert all(r["preemptions"] >= 1 for r in results) and rt.metrics.preemptions >= 1
    keys = [r["kv_swap_key"] for r in requests]
    assert len(set(keys)) == 2
    # each request's first abort saved its own blocks (2 saves at least, one per key)
    assert after["saves"] - before["saves"] >= 2 and after["saves_cancelled"] == before["saves_cancelled"]
