"""The virtual-time event loop: timers fire in order at their virtual times without waiting in
real time, cancellation and timeouts work, thread work takes no virtual time."""

from __future__ import annotations

import asyncio
import time

import pytest

from teola.sim.virtual_loop import VirtualEventLoop, run_virtual


def test_an_hour_of_timers_runs_at_once_in_order():
    order: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await asyncio.sleep(seconds)
        order.append((name, asyncio.get_running_loop().time()))

    async def main() -> float:
        await asyncio.gather(sleeper("hour", 3600), sleeper("second", 1), sleeper("ms", 0.001))
        return asyncio.get_running_loop().time()

    wall = time.perf_counter()
    end = run_virtual(main(), start=10.0)
    assert time.perf_counter() - wall < 5  # not an hour
    assert order == [("ms", 10.001), ("second", 11.0), ("hour", 3610.0)]
    assert end == 3610.0


def test_cancellation_and_timeouts_use_virtual_time():
    async def main() -> tuple[float, bool]:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(asyncio.sleep(1000))
        await asyncio.sleep(5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        t = loop.time()
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.sleep(100), timeout=2)
        except TimeoutError:
            timed_out = True
        return loop.time() - t, timed_out

    elapsed, timed_out = run_virtual(main())
    assert timed_out and elapsed == pytest.approx(2.0)


def test_thread_work_takes_no_virtual_time_and_timers_wait_for_it():
    async def main() -> tuple[float, int, float]:
        loop = asyncio.get_running_loop()
        timer = asyncio.ensure_future(asyncio.sleep(0.01))
        value = await asyncio.to_thread(lambda: time.sleep(0.2) or 7)  # real time passes, the clock waits
        now = loop.time()
        await timer
        return now, value, loop.time()

    now, value, end = run_virtual(main())
    assert value == 7 and now == 0.0 and end == pytest.approx(0.01)


def test_the_clock_never_reads_real_time():
    loop = VirtualEventLoop(start=5.0)
    try:
        assert loop.time() == 5.0
        time.sleep(0.01)
        assert loop.time() == 5.0
    finally:
        loop.close()
