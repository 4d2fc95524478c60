"""The in-process vLLM adapter reports a program call's KV on vLLM's own numbers (issue 73): its
prompt as vLLM tokenized it, the block size, and the blocks in use out of the cache's total, read
from vLLM's per-step scheduler stats; again each time the call takes a block."""

import pytest

from engines.protocol import StreamEvent

pytestmark = pytest.mark.engines


async def test_a_progress_call_reports_the_engines_blocks_in_use_as_it_grows(llm_engine):
    req = {
        "parts": [["question", "Count from 1 to 200, one number per line."]],
        "max_tokens": 120,
        "ignore_eos": True,
        "progress": True,
    }
    events = [e async for e in llm_engine.stream("decoding", [req])]
    reports = [p for _, kind, p in events if kind == StreamEvent.KV]
    final = events[-1][2]
    bs, total = llm_engine.block_size, llm_engine.kv.total
    assert bs > 0 and total > 0 and final["num_output_tokens"] == 120
    assert all(r.prompt_tokens == final["num_prompt_tokens"] and r.block_size == bs for r in reports)
    # one at the first output, then one per block its 120 output tokens take
    held = [-(-(final["num_prompt_tokens"] + n) // bs) for n in (1, 120)]
    assert len(reports) == held[1] - held[0] + 1
    used = [r.used_blocks for r in reports]
    assert all(u is not None and 0 < u <= total for u in used[1:]) and all(
        r.total_blocks == total for r in reports[1:]
    )
    # without progress (no program policy asked for it) nothing is reported
    plain = [
        k async for _, k, _ in llm_engine.stream("decoding", [{**req, "progress": False, "max_tokens": 8}])
    ]
    assert StreamEvent.KV not in plain
