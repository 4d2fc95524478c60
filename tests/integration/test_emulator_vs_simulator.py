"""The emulator keeps the simulator's time: one fixed trace (arrival times, prompt token ids with a
shared prefix for a third of them, output lengths with ignore_eos) goes through `teola emulate`
(a server process on the wall clock, streamed over HTTP) and through SimLLM on teola's virtual
loop; mean and median end-to-end latency agree within 5%. Also reported (printed): the first-token
latency of both, and the emulator's CPU time per request."""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time

import httpx
import pytest

from engines.sim.profile import simulated_engine
from teola.sim.virtual_loop import run_virtual
from tests.support.emulator_process import MODEL, PROFILE, EmulatorProcess

REQUESTS, RATE, SEED = 40, 4.0, 3
TOLERANCE = 0.05


def make_trace() -> list[tuple[float, list[int], int]]:
    """(arrival s, prompt token ids, output tokens) of each request."""
    rng = random.Random(SEED)
    shared = [rng.randrange(1000, 40000) for _ in range(512)]
    trace, t = [], 0.0
    for i in range(REQUESTS):
        ids = [rng.randrange(1000, 40000) for _ in range(rng.randint(100, 1500))]
        trace.append((t, (shared + ids) if i % 3 == 0 else ids, rng.randint(16, 160)))
        t += rng.expovariate(RATE)
    return trace


def simulated(trace) -> list[tuple[float, float]]:
    """(latency, first-token latency) of each request through SimLLM in virtual time."""

    async def main():
        engine = simulated_engine("sim", "vllm", PROFILE)
        await engine.start()
        loop = asyncio.get_running_loop()

        async def one(at, ids, n):
            await asyncio.sleep(at)
            start, first = loop.time(), None
            request = {
                "parts": [["user", "-"]],
                "prompt_token_ids": ids,
                "max_tokens": n,
                "ignore_eos": True,
                "progress": True,
            }
            async for _, kind, _ in engine.stream("decoding", [request]):
                if kind == "progress" and first is None:
                    first = loop.time() - start
            return loop.time() - start, first

        try:
            return await asyncio.gather(*(one(*r) for r in trace))
        finally:
            await engine.stop()

    return run_virtual(main())


async def emulated(url: str, trace) -> list[tuple[float, float]]:
    """(latency, first-token latency) of each request through the emulator, on the wall clock."""
    async with httpx.AsyncClient(
        base_url=url, timeout=120, limits=httpx.Limits(max_connections=200)
    ) as client:
        t0 = time.perf_counter() + 0.2

        async def one(at, ids, n):
            await asyncio.sleep(max(0.0, t0 + at - time.perf_counter()))
            start, first, tokens = time.perf_counter(), None, 0
            body = {
                "model": MODEL,
                "prompt": ids,
                "max_tokens": n,
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            async with client.stream("POST", "/v1/completions", json=body) as response:
                assert response.status_code == 200
                async for line in response.aiter_lines():
                    if line.startswith("data: {"):
                        chunk = json.loads(line[6:])
                        if chunk["choices"]:
                            tokens += 1
                            first = first or time.perf_counter() - start
                        else:
                            assert chunk["usage"]["completion_tokens"] == n
            assert tokens == n
            return time.perf_counter() - start, first

        return await asyncio.gather(*(one(*r) for r in trace))


def relative_error(a: float, b: float) -> float:
    return abs(a - b) / b


@pytest.fixture(scope="module")
def emulator():
    server = EmulatorProcess("--instances", "1")
    yield server
    print(server.stop())


def test_emulator_latencies_match_the_simulator_within_5_percent(emulator):
    trace = make_trace()
    sim = simulated(trace)
    cpu0 = emulator.cpu_seconds()
    wall = time.perf_counter()
    emu = asyncio.run(emulated(emulator.url, trace))
    wall = time.perf_counter() - wall
    cpu = emulator.cpu_seconds() - cpu0
    rows = {}
    for name, k, stat in (
        ("mean", 0, statistics.fmean),
        ("p50", 0, statistics.median),
        ("ttft mean", 1, statistics.fmean),
        ("ttft p50", 1, statistics.median),
    ):
        s, e = stat([x[k] for x in sim]), stat([x[k] for x in emu])
        rows[name] = (s, e, relative_error(e, s))
    tokens = sum(n for _, _, n in trace)
    print(
        f"\n{REQUESTS} requests, {tokens} output tokens, {wall:.1f} s wall; emulator CPU {cpu:.2f} s = "
        f"{1000 * cpu / REQUESTS:.1f} ms/request, {1e6 * cpu / tokens:.0f} us/output token"
    )
    for name, (s, e, err) in rows.items():
        print(f"  {name:9s} simulator {s:.3f} s  emulator {e:.3f} s  error {err:.1%}")
    assert rows["mean"][2] < TOLERANCE and rows["p50"][2] < TOLERANCE, rows
