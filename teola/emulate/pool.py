"""The emulator's engines: N simulated vLLM instances (engines/sim/llm.py, built from a profile's
"vllm" entry) on the server's own event loop, run on the wall clock, behind one port. Each request
goes to the least loaded instance (fewest running + waiting requests; ties to the lowest index), as
vLLM's data-parallel front end balances its engines."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from engines.protocol import StreamEvent
from engines.sim.llm import SimLLM
from engines.sim.profile import load_profile, simulated_engine
from engines.sim.wall_clock import WallClock

DECODE = "decoding"


@dataclass(frozen=True, slots=True)
class EngineState:
    """What vLLM's /metrics reports of one engine at a moment."""

    running: int
    waiting: int
    kv_usage: float  # used KV blocks / all blocks (vLLM's kv_cache_usage_perc: 1 = full)
    stats: dict[str, float]  # the simulated engine's counters (prompt_tokens, cached_tokens, ...)
    generated: int  # output tokens of finished calls
    finished: dict[str, int]  # finished calls by finish reason ("length", "stop", "abort")
    lag: float  # seconds the engine's last iteration started behind the wall clock
    max_lag: float  # the most it has been behind (engines/sim/wall_clock.py)


class EnginePool:
    """`instances` simulated engines of `profile` (a shipped name, a path or a dict)."""

    def __init__(
        self, profile: str | dict[str, Any], instances: int = 1, max_model_len: int | None = None
    ) -> None:
        if instances < 1:
            raise ValueError(f"--instances must be >= 1, got {instances}")
        self.profile = load_profile(profile)
        options = {"max_model_len": max_model_len} if max_model_len else {}
        self.engines: list[SimLLM] = []
        self.clocks = [WallClock() for _ in range(instances)]
        for i in range(instances):
            engine = simulated_engine(f"emulated-{i}", "vllm", self.profile, options)
            assert isinstance(engine, SimLLM)
            engine.clock = self.clocks[i]
            self.engines.append(engine)
        self.max_model_len = self.engines[0].max_model_len
        self.generated = [0] * instances
        self.finished: list[dict[str, int]] = [{} for _ in range(instances)]
        self._ids = itertools.count()

    @property
    def name(self) -> str:
        return str(self.profile.get("name", "profile"))

    async def start(self) -> None:
        for engine in self.engines:
            await engine.start()

    async def stop(self) -> None:
        for engine in self.engines:
            await engine.stop()

    def pick(self) -> SimLLM:
        """The least loaded engine."""
        return min(self.engines, key=lambda e: len(e.running) + len(e.waiting))

    async def complete(
        self, prompt_ids: list[int], tokens: int, reason: str, written: list[int]
    ) -> dict[str, Any]:
        """`generate` without the per-token events (a call answered whole): its final result."""
        engine = self.pick()
        index = self.engines.index(engine)
        result = (await engine.execute(DECODE, [_request(prompt_ids, tokens, written)]))[0]
        self._count(index, reason, result)
        return result

    async def generate(
        self, prompt_ids: list[int], tokens: int, reason: str, written: list[int]
    ) -> AsyncIterator[tuple[str, Any]]:
        """Run one call that writes exactly `tokens` tokens (token k has id written[k % len(written)],
        so a later prompt holding this answer hits its blocks in the prefix cache) after `prompt_ids`
        and finishes for `reason` ("length" or "stop"): yields ("token", n) as the n-th token is
        written, then ("final", result) with the engine's counts (num_prompt_tokens,
        num_cached_tokens, num_output_tokens). Closing the iterator early aborts the call."""
        engine = self.pick()
        index = self.engines.index(engine)
        tag = f"call-{next(self._ids)}"
        request = {**_request(prompt_ids, tokens, written), "progress": True, "tag": tag}
        done = False
        try:
            async for _, kind, value in engine.stream(DECODE, [request]):
                if kind == StreamEvent.PROGRESS:
                    yield "token", value.tokens
                elif kind == StreamEvent.FINAL:
                    done = True
                    self._count(index, reason, value)
                    yield "final", value
        finally:
            if not done:
                self.finished[index]["abort"] = self.finished[index].get("abort", 0) + 1
                await engine.abort([tag])

    def _count(self, index: int, reason: str, result: dict[str, Any]) -> None:
        self.generated[index] += int(result.get("num_output_tokens", 0))
        self.finished[index][reason] = self.finished[index].get(reason, 0) + 1

    def states(self) -> list[EngineState]:
        return [
            EngineState(
                len(e.running),
                len(e.waiting),
                1.0 - e.pool.free / e.pool.num_blocks,
                dict(e.stats),
                self.generated[i],
                dict(self.finished[i]),
                clock.lag,
                clock.max_lag,
            )
            for i, (e, clock) in enumerate(zip(self.engines, self.clocks))
        ]


def _request(prompt_ids: list[int], tokens: int, written: list[int]) -> dict[str, Any]:
    """A simulated engine's decoding request that writes exactly `tokens` tokens."""
    return {
        "parts": [["user", "-"]],
        "prompt_token_ids": prompt_ids,
        "output_token_ids": written,
        "max_tokens": tokens,
        "ignore_eos": True,
    }
