"""KV swap through teola's connector on the real vLLM (CPU), on one engine (kv_swap=True, small
max_model_len) started once for the module.

A call aborted mid-decode saves its KV blocks to host memory; its resume (prompt + decoded ids) loads
them back instead of prefilling them and decodes the same greedy tokens as the uninterrupted call.

issue 62: a call cancelled by its client is cancelled with its KV swap key (VLLMEngine.cancel), so the
connector saves nothing for it, while a call the policy preempts has its KV saved; a preempted batched
call has each request's KV saved under its own key. For these the swap costs are fixed (recomputing a
token "costs" 1 s) so that every preempted call's save pays and the connector's counters are exact.

The first test reads the connector's counters from zero: the tests run in file order."""

import asyncio
import dataclasses

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

PARTS = [
    [
        "question",
        "Write a long story about a lighthouse keeper, the sea and a storm that lasts "
        "for three days and three nights, with many details about the lamp.",
    ]
]
TOKENS, STOP_AT = 32, 8
PROMPT = "Write a long story about a lighthouse keeper and the sea."


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def swap_engine():
    engine = VLLMEngine(
        "llm-swap",
        model="smollm2-135m-instruct",
        max_model_len=512,
        max_num_seqs=4,
        kv_swap=True,
        kv_swap_bytes=64 << 20,
    )
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


@pytest.fixture
def fixed_costs(swap_engine):
    """The engine's measured swap costs, but a prefill cost of 1 s per token while the test runs:
    what `kv_swap_costs={"prefill_s_per_token": 1.0}` gives (every call carries the engine's costs)."""
    measured = swap_engine.swap_costs
    swap_engine.swap_costs = dataclasses.replace(measured, prefill_s_per_token=1.0)
    try:
        yield
    finally:
        swap_engine.swap_costs = measured


async def interrupted(engine: VLLMEngine, key: str) -> dict:
    """Decode with a tag and a swap key; abort once STOP_AT tokens are out; the partial result."""
    req = {
        "parts": PARTS,
        "max_tokens": TOKENS,
        "ignore_eos": True,
        "tag": key,
        "kv_swap_key": key,
        "progress": True,
    }
    final, aborted = None, False
    async for _, kind, payload in engine.stream("decoding", [req]):
        if kind == "progress" and payload.tokens >= STOP_AT and not aborted:
            aborted = await engine.abort([key]) == 1
        elif kind == "final":
            final = payload
    assert aborted and final["aborted"] and final["num_output_tokens"] < TOKENS
    return final


async def resumed(engine: VLLMEngine, key: str, done: list[int]) -> dict:
    req = {
        "parts": PARTS,
        "max_tokens": TOKENS - len(done),
        "ignore_eos": True,
        "kv_swap_key": key,
        "resume_ids": done,
    }
    return (await engine.execute("decoding", [req]))[0]


async def test_a_preempted_call_resumes_from_host_memory_to_the_same_tokens(swap_engine):
    engine = swap_engine
    costs = engine.swap_costs
    assert costs is not None and costs.prefill_s_per_token > 0 and costs.swap_bytes_per_s > 0
    plain = (await engine.execute("decoding", [{"parts": PARTS, "max_tokens": TOKENS, "ignore_eos": True}]))[
        0
    ]

    part = await interrupted(engine, "call-1")
    done = part["output_token_ids"]
    # the save runs in the engine step after the abort; then nothing holds the blocks and the prefix
    # cache can be emptied, as memory pressure would: the resume finds its KV only in host memory
    await until(lambda: engine._engine.reset_prefix_cache(), timeout=60)
    saved = await engine.kv_swap_stats()
    bs = engine.block_size
    assert saved["saves"] == 1 and saved["blocks_out"] == -(-saved["saved_tokens"] // bs) > 0
    rest = await resumed(engine, "call-1", done)
    after = await engine.kv_swap_stats()

    n_prompt = rest["num_prompt_tokens"]
    loaded = n_prompt - 1  # all but the last sampled token, which is computed as a decode step
    assert rest["kv_swap_loaded_tokens"] == after["loaded_tokens"] == loaded == saved["saved_tokens"]
    assert rest["num_cached_tokens"] == loaded  # everything cached came from host memory
    assert after["loads"] == 1 and after["blocks_in"] == saved["blocks_out"]
    assert after["entries"] == 0 and after["host_bytes"] == 0
    assert done + rest["output_token_ids"] == plain["output_token_ids"]
    assert part["text"] + rest["text"] == plain["text"]

    # prefix caching on: without the reset the cache still holds the call's full blocks; only the
    # partly filled last one (the prefix cache keeps full blocks only) comes from host memory
    part = await interrupted(engine, "call-2")
    rest = await resumed(engine, "call-2", part["output_token_ids"])
    last = await engine.kv_swap_stats()
    tail = (rest["num_prompt_tokens"] - 1) % bs
    assert (
        rest["kv_swap_loaded_tokens"] == tail and rest["num_cached_tokens"] == rest["num_prompt_tokens"] - 1
    )
    assert (
        last["saves"] == 2
        and last["loads"] == 1 + (tail > 0)
        and last["unused"] == after["unused"] + (tail == 0)
    )


async def test_a_call_paused_for_a_tool_with_swap_continues_from_host_memory(swap_engine):
    engine = swap_engine
    before = await engine.kv_swap_stats()
    paused = (
        await engine.execute(
            "decoding",
            [
                {
                    "parts": PARTS,
                    "max_tokens": STOP_AT,
                    "ignore_eos": True,
                    "pause_kv": "swap",
                    "kv_key": "tool-1",
                }
            ],
        )
    )[0]
    cont = [paused["output_token_ids"], "\n<result>42</result>\n"]
    # nothing holds the finished call's blocks once saved; emptying the prefix cache leaves the
    # continuation only host memory to find them in
    await until(lambda: engine._engine.reset_prefix_cache(), timeout=60)
    saved = await engine.kv_swap_stats()
    assert saved["saves"] == before["saves"] + 1
    assert saved["saved_tokens"] - before["saved_tokens"] == paused["num_prompt_tokens"] + STOP_AT - 1
    rest = (
        await engine.execute(
            "decoding",
            [{"parts": PARTS, "max_tokens": 8, "ignore_eos": True, "continuation": cont, "kv_key": "tool-1"}],
        )
    )[0]
    after = await engine.kv_swap_stats()
    assert after["loads"] == saved["loads"] + 1 and after["entries"] == 0
    assert rest["kv_swap_loaded_tokens"] == saved["saved_tokens"] - before["saved_tokens"] > 0
    assert rest["num_cached_tokens"] >= rest["kv_swap_loaded_tokens"]

    # the same continuation recomputed from scratch (another salt: nothing cached) decodes the same
    await until(lambda: engine._engine.reset_prefix_cache(), timeout=60)
    plain = (
        await engine.execute(
            "decoding",
            [
                {
                    "parts": PARTS,
                    "max_tokens": 8,
                    "ignore_eos": True,
                    "continuation": cont,
                    "cache_salt": "plain",
                }
            ],
        )
    )[0]
    assert plain["num_cached_tokens"] == 0 and "kv_swap_loaded_tokens" not in plain
    assert rest["output_token_ids"] == plain["output_token_ids"]


def runtime(engine: VLLMEngine, slots: int) -> Runtime:
    return Runtime(
        {"llm": Engine("llm", kind="vllm", max_efficient_batch=slots, max_batch=slots)},
        {"llm": Borrowed(engine)},
        policy="mlfq",
        policy_options={"mlfq": {"base_quantum": 4, "beta": None, "rerank_every": 1, "service": "tokens"}},
    )


async def settled_stats(engine: VLLMEngine) -> dict:
    """The connector's counters after one more engine step (they are reported as of the last one)."""
    await engine.execute(
        "decoding", [{"parts": [["question", "Say yes."]], "max_tokens": 2, "ignore_eos": True}]
    )
    return await engine.kv_swap_stats()


@pytest.mark.usefixtures("fixed_costs")
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
        assert (
            cancelled["saves"] == before["saves"]
            and cancelled["saves_cancelled"] == before["saves_cancelled"] + 1
        )
        assert cancelled["entries"] == before["entries"] and rt.metrics.aborted_requests == 1

        async with Program(rt, "long") as long_prog, Program(rt, "short") as short_prog:
            long_call = asyncio.ensure_future(
                long_prog.call(PROMPT, parent_ids=[], max_tokens=48, ignore_eos=True)
            )
            await until(lambda: any(st.level > 0 for st in core.calls.values()), timeout=120)
            await short_prog.call("Say yes.", parent_ids=[], max_tokens=2, ignore_eos=True)
            result = (await long_call).result
        after = await settled_stats(swap_engine)
    finally:
        await rt.stop()
    assert result["preemptions"] >= 1 and result["num_output_tokens"] == 48
    # the preempted call's aborts saved its KV (the first run's at least: it had decoded tokens)
    assert (
        after["saves"] - cancelled["saves"] >= 1 and after["saves_cancelled"] == cancelled["saves_cancelled"]
    )


@pytest.mark.usefixtures("fixed_costs")
async def test_a_preempted_batched_call_saves_each_requests_kv_under_its_own_key(swap_engine):
    rt = runtime(swap_engine, slots=2)
    await rt.start()
    try:
        core = rt.schedulers["llm"].policy.core
        before = await settled_stats(swap_engine)
        requests = [
            {"parts": [["question", f"{PROMPT} Part {i}."]], "max_tokens": 40, "ignore_eos": True}
            for i in range(2)
        ]
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
    keys = [rec.kv_swap_key for rec in bulk.records]  # the engine tier keeps them in the dispatch records
    assert len(set(keys)) == 2
    # each request's first abort saved its own blocks (2 saves at least, one per key)
    assert after["saves"] - before["saves"] >= 2 and after["saves_cancelled"] == before["saves_cancelled"]
