"""KV swap through teola's connector on the real vLLM (CPU): a call aborted mid-decode saves its KV
blocks to host memory; its resume (prompt + decoded ids) loads them back instead of prefilling them
and decodes the same greedy tokens as the uninterrupted call. Its own engine (kv_swap=True), started
once, small max_model_len."""
import pytest
import pytest_asyncio

from engines.vllm.engine import VLLMEngine
from tests.support.waiting import until

pytestmark = pytest.mark.engines

PARTS = [["question", "Write a long story about a lighthouse keeper, the sea and a storm that lasts "
                      "for three days and three nights, with many details about the lamp."]]
TOKENS, STOP_AT = 32, 8


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def swap_engine():
    engine = VLLMEngine("llm-swap", model="smollm2-135m-instruct", max_model_len=512, max_num_seqs=2,
                        kv_swap=True, kv_swap_bytes=64 << 20)
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


async def interrupted(engine: VLLMEngine, key: str) -> dict:
    """Decode with a tag and a swap key; abort once STOP_AT tokens are out; the partial result."""
    req = {"parts": PARTS, "max_tokens": TOKENS, "ignore_eos": True, "tag": key, "kv_swap_key": key,
           "progress": True}
    final, aborted = None, False
    async for _, kind, payload in engine.stream("decoding", [req]):
        if kind == "progress" and payload >= STOP_AT and not aborted:
            aborted = await engine.abort([key]) == 1
        elif kind == "final":
            final = payload
    assert aborted and final["aborted"] and final["num_output_tokens"] < TOKENS
    return final


async def resumed(engine: VLLMEngine, key: str, done: list[int]) -> dict:
    req = {"parts": PARTS, "max_tokens": TOKENS - len(done), "ignore_eos": True, "kv_swap_key": key,
           "resume_ids": done}
    return (await engine.execute("decoding", [req]))[0]


async def test_a_preempted_call_resumes_from_host_memory_to_the_same_tokens(swap_engine):
    engine = swap_engine
    costs = engine.swap_costs
    assert costs is not None and costs.prefill_s_per_token > 0 and costs.swap_bytes_per_s > 0
    plain = (await engine.execute("decoding", [{"parts": PARTS, "max_tokens": TOKENS, "ignore_eos": True}]))[0]

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
    assert rest["kv_swap_loaded_tokens"] == tail and rest["num_cached_tokens"] == rest["num_prompt_tokens"] - 1
    assert last["saves"] == 2 and last["loads"] == 1 + (tail > 0) and last["unused"] == after["unused"] + (tail == 0)


async def test_a_call_paused_for_a_tool_with_swap_continues_from_host_memory(swap_engine):
    engine = swap_engine
    before = await engine.kv_swap_stats()
    paused = (await engine.execute("decoding", [{"parts": PARTS, "max_tokens": STOP_AT, "ignore_eos": True,
                                                 "pause_kv": "swap", "kv_key": "tool-1"}]))[0]
    cont = [paused["output_token_ids"], "\n<result>42</result>\n"]
    # nothing holds the finished call's blocks once saved; emptying the prefix cache leaves the
    # continuation only host memory to find them in
    await until(lambda: engine._engine.reset_prefix_cache(), timeout=60)
    saved = await engine.kv_swap_stats()
    assert saved["saves"] == before["saves"] + 1
    assert saved["saved_tokens"] - before["saved_tokens"] == paused["num_prompt_tokens"] + STOP_AT - 1
    rest = (await engine.execute("decoding", [{"parts": PARTS, "max_tokens": 8, "ignore_eos": True,
                                               "continuation": cont, "kv_key": "tool-1"}]))[0]
    after = await engine.kv_swap_stats()
    assert after["loads"] == saved["loads"] + 1 and after["entries"] == 0
    assert rest["kv_swap_loaded_tokens"] == saved["saved_tokens"] - before["saved_tokens"] > 0
    assert rest["num_cached_tokens"] >= rest["kv_swap_loaded_tokens"]

    # the same continuation recomputed from scratch (another salt: nothing cached) decodes the same
    await until(lambda: engine._engine.reset_prefix_cache(), timeout=60)
    plain = (await engine.execute("decoding", [{"parts": PARTS, "max_tokens": 8, "ignore_eos": True,
                                                "continuation": cont, "cache_salt": "plain"}]))[0]
    assert plain["num_cached_tokens"] == 0 and "kv_swap_loaded_tokens" not in plain
    assert rest["output_token_ids"] == plain["output_token_ids"]
