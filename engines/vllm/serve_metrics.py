"""What a `vllm serve` process is doing, read from its Prometheus `/metrics`: requests running now
and requests finished so far. `RunningSampler` samples the running count of several servers while a
load runs (how many requests a client keeps in flight per server: the benchmarks report it, the
tests assert overlap with it)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

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

    async def __aenter__(self) -> RunningSampler:
        self._task = asyncio.ensure_future(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    def busy(self, url: str) -> list[int]:
        """The samples of `url` taken while it ran something."""
        return [n for n in self.samples[url] if n > 0]

    def series(self, url: str, per: int) -> list[int]:
        """`url`'s samples over time, `per` at a time: the most running in each group."""
        s = self.samples[url]
        return [max(s[i : i + per]) for i in range(0, len(s), per)]

    def summary(self, per: int | None = None) -> dict[str, dict[str, Any]]:
        """Per server: the most requests seen running, their mean over the samples taken while it
        ran something, and with `per` the series over time (`series`)."""
        out: dict[str, dict[str, Any]] = {}
        for url in self.urls:
            busy = self.busy(url)
            out[url] = {
                "max": max(busy, default=0),
                "mean_busy": sum(busy) / len(busy) if busy else 0.0,
                "samples": len(self.samples[url]),
            }
            if per:
                out[url]["series"] = self.series(url, per)
        return out
