"""Loopback stand-ins for remote services, with the latencies of their kind (benchmark only).

One FastAPI app, run in its own process (`python -m bench remote_services --port P`), serves:

- `GET /search?q=&top_k=` -> {"results": [{"title", "text", "score"}]}: PostgreSQL full-text search
  over the shipped Wikipedia corpus (engines.search.text_search, 10,033 lead paragraphs), the wire format
  of engines.search.remote_search (`Engine("search", kind="search", url=.../search)`);
- `GET /tools/<name>?<args>` -> the result as JSON (a number, or an object with a "text" field,
  which is what teola renders of an object into a prompt): calculator, convert_units (engines.tools.builtin),
  wiki_lookup (the same corpus, top hit's title and first 400 characters), weather (a synthetic
  forecast derived from a hash of the city: a weather-like API, not real data). The tool engine
  calls them through its HTTP tool path (`http_tools`, see `tool_specs`).

Every answer is delayed by a sample from a seeded lognormal fitted to a (p50, p95) pair (the
fit: mu = ln p50, sigma = ln(p95 / p50) / 1.645). Sources and assumptions:

- web search: Tavily's search API, p50 800 ms / p95 2,200 ms, as published in Scavio's glossary
  page "Search API latency budget" (https://www.scavio.dev/glossary/search-api-latency-budget,
  2026 figures for six search APIs: Brave 250/700, Serper 400/1,100, Exa 600/1,800, Tavily
  800/2,200, SerpAPI 1,200/3,500 ms). Tavily is the API LLM-agent frameworks default to and sits
  mid-range; the page comes from a vendor of a competing API, so treat it as indicative;
- wiki_lookup: an encyclopedia summary REST lookup, assumed p50 150 ms / p95 450 ms (no published
  percentiles found; a CDN-cached page summary one region away);
- weather: a hosted weather API, assumed p50 250 ms / p95 700 ms (no published percentiles
  found; Brave's search figures above as the scale of a single-lookup public API);
- calculator, convert_units: a small compute service in the same region, assumed p50 30 ms /
  p95 100 ms (network round trip + framework overhead; the computation itself is microseconds).

The search work itself (Postgres) runs in this process, so the latency a caller sees is the
sampled delay plus the real search time.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import os
import random
import socket
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from bench.lib.results import ROOT, stop_process
from bench.lib.startup import wait_healthy

Z95 = 1.6448536269514722  # standard normal quantile at 0.95


@dataclass(frozen=True, slots=True)
class Lognormal:
    """A lognormal latency distribution (seconds) given by its median and 95th percentile."""

    p50: float
    p95: float

    def __post_init__(self) -> None:
        if not (self.p50 > 0 and self.p95 > self.p50):
            raise ValueError(f"need 0 < p50 < p95, got p50={self.p50!r} p95={self.p95!r}")

    @property
    def mu(self) -> float:
        return math.log(self.p50)

    @property
    def sigma(self) -> float:
        return math.log(self.p95 / self.p50) / Z95

    @property
    def mean(self) -> float:
        return math.exp(self.mu + self.sigma**2 / 2)

    def sample(self, rng: random.Random) -> float:
        return rng.lognormvariate(self.mu, self.sigma)


SEARCH_LATENCY = Lognormal(0.800, 2.200)
TOOL_LATENCY = {
    "calculator": Lognormal(0.030, 0.100),
    "convert_units": Lognormal(0.030, 0.100),
    "wiki_lookup": Lognormal(0.150, 0.450),
    "weather": Lognormal(0.250, 0.700),
}
LATENCY_SOURCES = {
    "search": "Tavily search API p50 0.8 s / p95 2.2 s (https://www.scavio.dev/glossary/search-api-latency-budget)",
    "wiki_lookup": "assumed p50 0.15 s / p95 0.45 s (encyclopedia summary REST lookup)",
    "weather": "assumed p50 0.25 s / p95 0.7 s (hosted weather API)",
    "calculator": "assumed p50 0.03 s / p95 0.1 s (same-region compute service)",
    "convert_units": "assumed p50 0.03 s / p95 0.1 s (same-region compute service)",
}
# The tools' arguments, for the tool engine's HTTP path and for the agent prompt.
TOOL_ARGS = {
    "calculator": ("expression",),
    "convert_units": ("value", "from_unit", "to_unit"),
    "weather": ("city",),
    "wiki_lookup": ("query",),
}


def weather(city: str) -> dict[str, Any]:
    """A synthetic, deterministic forecast for `city` (a weather-like API's answer shape)."""
    if not isinstance(city, str) or not city.strip():
        raise ValueError("city must be a non-empty string")
    h = int(hashlib.sha256(city.strip().lower().encode()).hexdigest()[:8], 16)
    sky = ("sunny", "cloudy", "rainy", "windy", "snowy")[h % 5]
    temp, humidity = round(-5 + (h >> 3) % 36 + ((h >> 9) % 10) / 10, 1), 30 + (h >> 13) % 60
    return {
        "city": city.strip(),
        "temperature_c": temp,
        "sky": sky,
        "humidity_pct": humidity,
        "text": f"Weather in {city.strip()}: {sky}, {temp} C, humidity {humidity}%.",
    }


class Delays:
    """One seeded random stream per endpoint, so a run's delays do not depend on how other
    endpoints' calls interleave."""

    def __init__(
        self,
        seed: int,
        search: Lognormal = SEARCH_LATENCY,
        tools: dict[str, Lognormal] | None = None,
        scale: float = 1.0,
    ) -> None:
        if not scale >= 0:
            raise ValueError(f"latency scale must be >= 0, got {scale!r}")
        self.dists = {"search": search, **(TOOL_LATENCY if tools is None else tools)}
        self.rngs = {name: random.Random(f"{seed}:{name}") for name in self.dists}
        self.scale = scale

    def next(self, endpoint: str) -> float:
        return self.scale * self.dists[endpoint].sample(self.rngs[endpoint])


def create_service(search: Any, delays: Delays) -> Any:
    """The FastAPI app over a started "searching" engine adapter (any object with
    `execute("searching", [{"query", "top_k"}])`)."""
    from fastapi import FastAPI, HTTPException, Query

    from engines.tools.builtin import calculator, convert_units

    app = FastAPI(title="teola bench remote services")
    app.state.calls = {name: 0 for name in delays.dists}

    async def delayed(endpoint: str) -> None:
        app.state.calls[endpoint] += 1
        await asyncio.sleep(delays.next(endpoint))

    async def top_hits(q: str, top_k: int) -> list[dict[str, Any]]:
        if not q.strip():
            raise HTTPException(422, "q must be a non-empty query")
        [hits] = await search.execute("searching", [{"query": q, "top_k": top_k}])
        return hits

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"ok": True, "calls": app.state.calls}

    @app.get("/search")
    async def do_search(
        q: str = Query(..., max_length=2000), top_k: int = Query(4, ge=1, le=50)
    ) -> dict[str, Any]:
        hits = await top_hits(q, top_k)
        await delayed("search")
        return {"results": hits}

    async def wiki_lookup(query: str) -> dict[str, str]:
        hits = await top_hits(query, 1)
        return (
            {"title": hits[0]["title"], "text": hits[0]["text"][:400]} if hits else {"title": "", "text": ""}
        )

    add_tool(app, "calculator", calculator, delayed)
    add_tool(
        app,
        "convert_units",
        lambda value, from_unit, to_unit: convert_units(float(value), from_unit, to_unit),
        delayed,
    )
    add_tool(app, "weather", weather, delayed)
    add_tool(app, "wiki_lookup", wiki_lookup, delayed)
    return app


def add_tool(app: Any, name: str, fn: Any, delayed: Any) -> None:
    """GET /tools/<name> on `app`: `fn` called with the query's TOOL_ARGS[name] (strings), a 422 for what
    it refuses, answered after the endpoint's drawn delay (`delayed(name)`)."""
    import inspect

    from fastapi import HTTPException

    async def endpoint(**kwargs: Any) -> Any:
        try:
            result = await fn(**kwargs) if asyncio.iscoroutinefunction(fn) else fn(**kwargs)
        except (ValueError, TypeError) as exc:
            raise HTTPException(422, f"{name}: {exc}") from exc
        await delayed(name)
        return result

    endpoint.__signature__ = inspect.Signature(
        [  # type: ignore[attr-defined]
            inspect.Parameter(a, inspect.Parameter.KEYWORD_ONLY, annotation=str) for a in TOOL_ARGS[name]
        ]
    )
    app.get(f"/tools/{name}", name=name)(endpoint)


def tool_specs(base_url: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    """`http_tools` option of the tool engine for the service at `base_url`."""
    return [
        {
            "name": name,
            "url": f"{base_url}/tools/{name}",
            "method": "GET",
            "timeout": timeout,
            "description": f"args: {', '.join(args)}",
        }
        for name, args in TOOL_ARGS.items()
    ]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServiceProcess:
    """The services in a child process on a loopback port; `async with` starts and stops it."""

    def __init__(
        self, seed: int = 0, scale: float = 1.0, nice: int = 0, startup_timeout: float = 180.0
    ) -> None:
        self.seed, self.scale, self.nice, self.startup_timeout = seed, scale, nice, startup_timeout
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    @property
    def search_url(self) -> str:
        return f"{self.base_url}/search"

    async def __aenter__(self) -> ServiceProcess:
        cmd = [
            sys.executable,
            "-m",
            "bench",
            "remote_services",
            "--port",
            str(self.port),
            "--seed",
            str(self.seed),
            "--scale",
            str(self.scale),
        ]
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, preexec_fn=(lambda: os.nice(self.nice)) if self.nice else None
        )
        await wait_healthy(
            self.proc,
            f"{self.base_url}/healthz",
            self.startup_timeout,
            exited="the remote services process exited with code {code} during start-up (see its log above)",
            silent=f"the remote services did not answer on {self.base_url} within "
            f"{self.startup_timeout:.0f} s",
        )
        return self

    async def calls(self) -> dict[str, int]:
        import httpx

        async with httpx.AsyncClient(timeout=5.0) as client:
            return (await client.get(f"{self.base_url}/healthz")).json()["calls"]

    async def __aexit__(self, *exc: Any) -> None:
        await stop_process(self.proc)


async def _serve(port: int, seed: int, scale: float) -> None:
    import signal

    import uvicorn

    from engines.search.text_search import TextSearchEngine

    search = TextSearchEngine("remote_services.search", progress=False)
    await search.start()
    server = uvicorn.Server(
        uvicorn.Config(
            create_service(search, Delays(seed, scale=scale)),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))
    try:
        await server.serve()
    finally:
        await search.stop()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench remote_services`."""
    p.add_argument("--port", type=int, default=8900)
    p.add_argument("--seed", type=int, default=0, help="seed of the latency samples")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every delay (0: no delay)")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench remote_services` (argv: the options given, for its page)."""
    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    asyncio.run(_serve(args.port, args.seed, args.scale))
    return 0
