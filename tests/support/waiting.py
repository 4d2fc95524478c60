"""Waiting on a condition instead of sleeping a guessed time."""
from __future__ import annotations

import asyncio
import inspect
from typing import Any, Callable


async def until(condition: Callable[[], Any], timeout: float = 10.0) -> None:
    """Yield to the event loop until `condition()` (or the value it awaits to) is true; fail after
    `timeout` seconds."""
    async def holds() -> bool:
        value = condition()
        return bool(await value) if inspect.isawaitable(value) else bool(value)

    async def loop() -> None:
        while not await holds():
            await asyncio.sleep(0)
    try:
        await asyncio.wait_for(loop(), timeout)
    except TimeoutError:
        raise AssertionError(f"condition not met within {timeout} s") from None
