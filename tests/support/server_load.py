"""What a real `vllm serve` is doing, read from its Prometheus `/metrics`: requests running now and
requests finished so far. `RunningSampler` samples the running count of several servers while a
load runs (for asserting overlap and reporting in-flight requests per server)."""
from __future__ import annotations

import asyncio
import re

import httpx

_RUNNING = re.compile(r"^vllm:num_requests_running\{[^}]*\} ([0-9.eE+]+)$", re.MULTILINE)
_FINISHED = re.compile(r"^vllm:request_success_total\{[^}]*\} ([0-9.eE+]+)$", re.MULTILINE)


async def running(client: httpx.AsyncClient, url: str) -> int:
    """Requests the server at `url` is running now."""
    return int(sum(float(v) for v in _RUNNING.findall((await client.get(f"{url}/metrics")).text)))


async def finished(url: str) -> int:
    """Requests the server at `url` has finished since it started (any finish reason)."""
    async with httpx.AsyncClient(timeout=10) as client:
        return int(sum(float(v) for v in _FINISHED.findall((await client.get(f"{url}/metrics")).text)))


class RunningSampler:
    """`async with RunningSampler(urls) as s:` samples each server's running requests every
    `every` seconds until the block ends; `s.samples[url]` lists them (unreachable: skipped)."""

    def __init__(self, urls: list[str], every: float = 0.05) -> None:
        self.urls = list(urls)
        self.every = every
        self.samples: dict[str, list[int]] = {u: [] for u in self.urls}
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        async with httpx.AsyncClient(timeout=5) as client:
            while True:
                for url in self.urls:
                    try:
                        self.samples[url].append(await running(client, url))
                    except httpx.HTTPError:
                        pass
                await asyncio.sleep(self.every)

    async def __aenter__(self) -> "RunningSampler":
        self._task = asyncio.ensure_future(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    def busy(self, url: str) -> list[int]:
        """The samples of `url` taken while it ran something."""
        return [n for n in self.samples[url] if n > 0]
