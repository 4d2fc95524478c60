"""A simulated LLM call that pauses for a tool and continues (engines/sim/admission.py): what its KV
costs under each LAMPS / INFERCEPT handling, on hand-computed cases in virtual time (cost model:
1 s per iteration + 0.01 s per prefilled token + 0.1 s per decoding sequence; 16-token blocks)."""

from __future__ import annotations

import asyncio

import pytest

from engines.sim.llm import SimLLM
from teola.sim.virtual_loop import run_virtual

COST = {"base": 1.0, "prefill_token": 0.01, "decode_seq": 0.1, "context_token": 0.0}
BLOCKS = 64


def first(handling: str, **kw) -> dict:
    """37 words + 3 generation-prompt tokens = 40 prompt tokens; 5 tokens before the tool call."""
    return {
        "parts": [["question", " ".join(["a"] * 37)]],
        "max_tokens": 5,
        "ignore_eos": True,
        "pause_kv": handling,
        "kv_key": "call-1",
        **kw,
    }


def then(out_ids: list[int]) -> dict:
    """The continuation: the 5 tokens written before the pause, a 3-token tool result, 2 more tokens."""
    return {
        "parts": [["question", " ".join(["a"] * 37)]],
        "max_tokens": 2,
        "ignore_eos": True,
        "continuation": [out_ids, "b b b"],
        "kv_key": "call-1",
    }


def pause_and_continue(handling: str, swap_s: float = 0.0, reset_cache: bool = False):
    async def main():
        e = SimLLM(
            "llm",
            COST,
            token_ratio=1.0,
            template_tokens=0,
            block_size=16,
            num_blocks=BLOCKS,
            swap_seconds_per_block=swap_s,
        )
        await e.start()
        [a] = await e.execute("decoding", [first(handling)])
        free_during_pause = e.pool.free
        if reset_cache:
            e.reset_prefix_cache()
        loop = asyncio.get_running_loop()
        t = loop.time()
        [b] = await e.execute("decoding", [then(a["output_token_ids"])])
        took = loop.time() - t
        await e.stop()
        return a, b, took, free_during_pause, e.pool.free, e.stats

    return run_virtual(main())


def test_preserve_keeps_the_blocks_through_the_pause_and_recomputes_nothing():
    a, b, took, during, after, stats = pause_and_continue("preserve")
    assert (
        during == BLOCKS - 3
    )  # 44 computed tokens (40 prompt + 4 of the 5 written) in 3 blocks, not evictable
    assert b["num_cached_tokens"] == 44 and b["num_prompt_tokens"] == 48
    # the 4 uncomputed tokens (last written + 3 of the tool result) in one iteration, then 1 decode step
    assert took == pytest.approx((1 + 0.04) + 1.1)
    assert after == BLOCKS and stats["paused_preserve"] == 1 and stats["resumed_paused_tokens"] == 44


def test_discard_frees_the_blocks_and_the_continuation_hits_the_prefix_cache_for_full_blocks():
    a, b, took, during, after, stats = pause_and_continue("discard")
    assert during == BLOCKS  # freed (the two full blocks stay cached but evictable)
    assert b["num_cached_tokens"] == 32
    assert took == pytest.approx((1 + 0.16) + 1.1)


def test_discard_after_the_cache_lost_the_blocks_recomputes_everything():
    a, b, took, *_ = pause_and_continue("discard", reset_cache=True)
    assert b["num_cached_tokens"] == 0
    assert took == pytest.approx((1 + 0.48) + 1.1)


def test_swap_frees_the_blocks_and_pays_the_swap_out_and_the_swap_in():
    a, b, took, during, after, stats = pause_and_continue("swap", swap_s=0.5)
    assert during == BLOCKS and stats["swapped_blocks"] == 3
    # first iteration: compute 4 tokens + swap 3 blocks in (1.5 s) + the swap-out debt of 3 blocks (1.5 s)
    assert b["num_cached_tokens"] == 44
    assert took == pytest.approx((1 + 0.04 + 1.5 + 1.5) + 1.1)


def test_aborting_the_program_frees_a_preserved_kv_whose_continuation_never_comes():
    async def main():
        e = SimLLM("llm", COST, token_ratio=1.0, template_tokens=0, block_size=16, num_blocks=BLOCKS)
        await e.start()
        await e.execute("decoding", [first("preserve", owner="program-7")])
        held = e.pool.free
        stopped = await e.abort(["program-7"])
        await e.stop()
        return held, stopped, e.pool.free, dict(e.paused)

    held, stopped, free, paused = run_virtual(main())
    assert held == BLOCKS - 3 and stopped == 1 and free == BLOCKS and paused == {}


def test_pause_fields_are_checked():
    from engines.llm_text.llm_requests import check_request

    with pytest.raises(ValueError, match="kv_key"):
        check_request("decoding", {"parts": [["q", "x"]], "pause_kv": "preserve"}, 8)
    with pytest.raises(ValueError, match="pause_kv"):
        check_request("decoding", {"parts": [["q", "x"]], "pause_kv": "keep", "kv_key": "k"}, 8)
    with pytest.raises(ValueError, match=r"continuation'\[1\]"):
        check_request("decoding", {"parts": [["q", "x"]], "continuation": ["ok", [1, -2]]}, 8)
    with pytest.raises(ValueError, match="continuation"):
        check_request("prefilling", {"parts": [["q", "x"]], "continuation": ["x"]}, 8)
