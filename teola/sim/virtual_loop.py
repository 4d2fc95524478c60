"""A virtual-time asyncio event loop: the clock jumps to the next timer whenever every task is idle.

The runtime reads time only through its event loop (`loop.time()`: graph scheduler, engine
schedulers, policies, supervisors), and simulated engines take model time with `asyncio.sleep`, so
the unchanged runtime runs an hour of traffic in as long as its Python work takes.

How: asyncio's loop asks its selector to wait `timeout` seconds for I/O when nothing is ready and a
timer is due later. The selector here polls without blocking and, when nothing arrived, moves the
clock to that timer instead of sleeping. Work handed to threads (`run_in_executor`,
`asyncio.to_thread`) is waited for in real time with the clock stopped, so it takes no virtual time.
Real sockets are polled but never waited for while a timer is pending: a simulation should not
depend on real network I/O (its engines and tools live on the loop).
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class _VirtualSelector(selectors.DefaultSelector):
    """A selector that never blocks while its loop has timers: it advances the loop's clock."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualEventLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        loop = self.loop
        if loop is None or timeout == 0:
            return super().select(timeout)
        if loop._threads:  # thread work in flight: wait for it with the clock stopped
            return super().select(None)
        events = super().select(0)
        if events or timeout is None:
            return events or super().select(None)
        loop._advance()
        return []


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """An event loop on a virtual clock starting at `start` seconds (`time()`); nothing here reads
    the real clock. See the module docstring."""

    def __init__(self, start: float = 0.0) -> None:
        selector = _VirtualSelector()
        super().__init__(selector)
        selector.loop = self
        self._now = float(start)
        self._threads = 0
        self.jumps = 0  # how many times the clock moved (a measure of simulated events)

    def time(self) -> float:
        return self._now

    def _advance(self) -> None:
        # asyncio drops cancelled timers from the heap's head before it polls, so the head is due next
        if self._scheduled:
            self._now = max(self._now, self._scheduled[0].when())
            self.jumps += 1

    def run_in_executor(self, executor: Any, func: Callable[..., T], *args: Any) -> asyncio.Future:
        future = super().run_in_executor(executor, func, *args)
        self._threads += 1

        def done(_: asyncio.Future) -> None:
            self._threads -= 1

        future.add_done_callback(done)
        return future


def run_virtual(main: Awaitable[T], start: float = 0.0) -> T:
    """Run a coroutine to completion on a fresh `VirtualEventLoop` (like `asyncio.run`)."""
    with asyncio.Runner(loop_factory=lambda: VirtualEventLoop(start)) as runner:
        return runner.run(main)
