"""A simulated LLM engine's iterations on the wall clock (engines/sim/llm.py with `clock = WallClock()`,
as `teola emulate` runs it).

On a real event loop a timer fires late by however long the loop (or the machine) was busy. If
each iteration started "now", that lateness would add up over iterations and the emulated engine
would run slower than its profile. Instead an iteration starts at its predecessor's nominal end (or
now, after the engine was idle), and a late loop catches up by not sleeping. While it is behind by
`lag` seconds, the engine's clock is that much behind the wall clock: a request arriving then
joins the next iteration as if it had arrived at the engine's time, and tokens go out `lag` late,
so a client sees the profile's latency plus the lag at its last token minus the lag at its arrival."""

from __future__ import annotations

import asyncio


class WallClock:
    """Nominal iteration times of one engine, and how far behind the wall clock it is."""

    def __init__(self) -> None:
        self.ended: float | None = None  # nominal end of the last iteration while the engine is busy
        self.lag = 0.0  # seconds the last iteration started behind its nominal start
        self.max_lag = 0.0

    def idle(self) -> None:
        """The engine has nothing to do: its next iteration starts when it is woken."""
        self.ended = None

    def start(self) -> float:
        """The nominal start of the next iteration."""
        return asyncio.get_running_loop().time() if self.ended is None else self.ended

    async def sleep(self, seconds: float, start: float) -> None:
        """Wait until the iteration that started at `start` and lasts `seconds` ends."""
        now = asyncio.get_running_loop().time()
        self.ended = start + seconds
        self.lag = max(0.0, now - start)
        self.max_lag = max(self.max_lag, self.lag)
        await asyncio.sleep(max(0.0, self.ended - now))
