"""Preserved KV cannot deadlock the simulated engine (engines/sim/admission.py reclaim_preserved):
when nothing runs and a waiting call cannot get blocks because paused calls' preserved KV fills the
memory, the most recently paused one loses its KV and later continues as if discarded."""

from __future__ import annotations

import asyncio

from engines.sim.llm import SimLLM
from teola.sim.virtual_loop import run_virtual
from tests.unit.engines.test_sim_pause import COST, first, then


def test_a_call_that_cannot_fit_next_to_preserved_kv_frees_it_instead_of_waiting_forever():
    async def main():
        e = SimLLM("llm", COST, token_ratio=1.0, template_tokens=0, block_size=16, num_blocks=4)
        await e.start()
        try:
            [a] = await e.execute("decoding", [first("preserve")])  # 45 tokens: 3 of the 4 blocks stay held
            held = e.pool.free
            other = {"parts": [["question", " ".join(["z"] * 40)]], "max_tokens": 3, "ignore_eos": True}
            [b] = await asyncio.wait_for(e.execute("decoding", [other]), timeout=1e6)
            [c] = await e.execute("decoding", [then(a["output_token_ids"])])
            return held, b, c, dict(e.stats), dict(e.paused)
        finally:
            await e.stop()

    held, b, c, stats, paused = run_virtual(main())
    assert held == 1 and b["num_output_tokens"] == 3
    assert stats["reclaimed_preserved"] == 1 and paused == {}
    assert c["num_output_tokens"] == 2 and c["num_cached_tokens"] < 44  # recomputed what the cache lost


def test_nothing_is_reclaimed_while_memory_suffices():
    async def main():
        e = SimLLM("llm", COST, token_ratio=1.0, template_tokens=0, block_size=16, num_blocks=64)
        await e.start()
        try:
            [a] = await e.execute("decoding", [first("preserve")])
            [c] = await e.execute("decoding", [then(a["output_token_ids"])])
            return c, dict(e.stats)
        finally:
            await e.stop()

    c, stats = run_virtual(main())
    assert "reclaimed_preserved" not in stats and c["num_cached_tokens"] == 44  # all but the last token, kept
