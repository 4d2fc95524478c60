"""The start-up wait of a server run in a child process: poll its health URL until it answers."""

from __future__ import annotations

import asyncio
import subprocess
import time

from bench.lib.results import stop_process


async def wait_healthy(proc: subprocess.Popen, url: str, timeout: float, exited: str, silent: str) -> None:
    """Return once GET `url` succeeds (tried every 0.3 s). RuntimeError(`exited`, its `{code}` the exit
    code) if `proc` ends first; after `timeout` seconds, stop `proc` and raise RuntimeError(`silent`)."""
    import httpx

    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(exited.format(code=proc.returncode))
            try:
                if (await client.get(url)).is_success:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                await stop_process(proc)
                raise RuntimeError(silent)
            await asyncio.sleep(0.3)
