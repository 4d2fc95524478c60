"""Waiting on a condition instead of sleeping a guessed time."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any


async def until(condition: Callable[[], Any], timeout: float = 10.0, interval: float = 0.0) -> None:
    """Yield to the event loop until `condition()` (or the value it awaits to) is true; fail after
    `timeout` seconds. `interval` is the pause between checks: 0 (the default) for a condition
    another task of this loop makes true; a tenth of a second or so for one asked over HTTP or of
    another process, so that asking does not take the CPU the awaited work needs."""

    async def holds() -> bool:
        value = condition()
        return bool(await value) if inspect.isawaitable(value) else bool(value)

    async def loop() -> None:
        while not await holds():
            await asyncio.sleep(interval)

    try:
        await asyncio.wait_for(loop(), timeout)
    except TimeoutError:
        raise AssertionError(f"condition not met within {timeout} s") from None
