"""SimLLM on a real event loop with a WallClock: a loop blocked for a while does not slow the engine
down (later iterations catch up), where plain sleeps add the block to every call still running."""

from __future__ import annotations

import asyncio
import time

from engines.sim.llm import SimLLM
from engines.sim.wall_clock import WallClock

ITERATION = 0.01  # seconds: every iteration costs `base` only
TOKENS = 20  # one prefill iteration that writes the first token, then 19 decode iterations
BLOCK = 0.06


async def one_call(clock: WallClock | None) -> float:
    engine = SimLLM("llm", {"base": ITERATION})
    engine.clock = clock
    await engine.start()
    try:

        async def block_the_loop():
            await asyncio.sleep(0.05)
            time.sleep(BLOCK)  # the loop (the process) is busy: every timer fires late

        t0 = time.perf_counter()
        blocker = asyncio.create_task(block_the_loop())
        result = (
            await engine.execute(
                "decoding",
                [
                    {
                        "parts": [["user", "-"]],
                        "prompt_token_ids": list(range(32)),
                        "max_tokens": TOKENS,
                        "ignore_eos": True,
                    }
                ],
            )
        )[0]
        await blocker
        assert result["num_output_tokens"] == TOKENS and result["num_prompt_tokens"] == 32
        return time.perf_counter() - t0
    finally:
        await engine.stop()


async def test_a_wall_clock_engine_catches_up_after_the_loop_was_blocked():
    on_time = await one_call(WallClock())
    late = await one_call(None)
    assert late >= TOKENS * ITERATION + BLOCK
    assert on_time < late - BLOCK / 2 and on_time < TOKENS * ITERATION + BLOCK / 2


def test_a_request_may_carry_its_prompt_token_ids():
    async def main():
        engine = SimLLM("llm", {"base": 0.001})
        await engine.start()
        try:
            request = {
                "parts": [["user", "-"]],
                "prompt_token_ids": list(range(40)),
                "max_tokens": 3,
                "ignore_eos": True,
            }
            first = (await engine.execute("decoding", [request]))[0]
            again = (await engine.execute("decoding", [request]))[0]
            return first, again
        finally:
            await engine.stop()

    from teola.sim.virtual_loop import run_virtual

    first, again = run_virtual(main())
    assert (first["num_prompt_tokens"], first["num_cached_tokens"]) == (40, 0)
    assert again["num_cached_tokens"] == 32  # two full blocks of 16
