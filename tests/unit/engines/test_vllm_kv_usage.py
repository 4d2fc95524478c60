"""engines.vllm.kv_usage: vLLM's per-step KV usage (its SchedulerStats, as its stat loggers get
them) as the blocks in use that a KVReport carries. The logger vLLM calls is checked on the real
engine (tests/integration/test_vllm_engine.py)."""

from types import SimpleNamespace

from engines.vllm.kv_usage import KVUsage


def test_the_last_steps_usage_gives_the_blocks_in_use():
    kv = KVUsage()
    logger = kv  # what the vLLM logger of `factory` hands each step's SchedulerStats to
    assert kv.used_blocks(400) is None  # no step yet
    logger.record(SimpleNamespace(kv_cache_usage=0.25))
    assert kv.used_blocks(400) == 100 and kv.steps == 1
    logger.record(SimpleNamespace(kv_cache_usage=0.5025))
    assert kv.used_blocks(400) == 201  # the last step's, rounded to a block
    logger.record(None)  # a step without scheduler stats leaves it
    assert kv.used_blocks(400) == 201 and kv.steps == 2
    assert kv.used_blocks(0) is None


def test_a_scheduler_without_the_field_reports_nothing():
    kv = KVUsage()
    kv.record(SimpleNamespace(num_running_reqs=3))
    assert kv.used_blocks(400) is None and kv.steps == 0


def test_a_request_is_reported_at_its_first_output_and_at_each_block_it_takes():
    kv = KVUsage()
    kv.total = 400
    seen, first = kv.due(prompt=40, decoded=1, block_size=16, seen=0)
    # 41 tokens in ceil(41 / 16) = 3 blocks; no step reported yet: no block counts
    assert seen == 3 and first is not None
    assert (first.prompt_tokens, first.block_size, first.used_blocks, first.total_blocks) == (
        40,
        16,
        None,
        None,
    )
    kv.record(SimpleNamespace(kv_cache_usage=0.1))
    assert kv.due(prompt=40, decoded=8, block_size=16, seen=3) == (3, None)  # 48 tokens: still 3 blocks
    seen, grown = kv.due(prompt=40, decoded=9, block_size=16, seen=3)  # the 49th token takes a 4th
    assert seen == 4 and grown is not None and (grown.used_blocks, grown.total_blocks) == (40, 400)
    seen, jumped = kv.due(prompt=40, decoded=60, block_size=16, seen=4)  # several tokens in one output
    assert seen == 7 and jumped is not None
