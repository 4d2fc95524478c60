"""The benchmark's loopback services (bench/lib/remote_services.py): the fitted latency distributions,
their seeded streams, the HTTP endpoints and errors, the tool engine's HTTP path to them, and the
workload of two-tool questions."""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

import httpx
import pytest

from bench.lib.remote_services import (
    SEARCH_LATENCY,
    TOOL_ARGS,
    Delays,
    Lognormal,
    create_service,
    tool_specs,
    weather,
)
from bench.lib.results import percentile
from bench.lib.workloads import tool_queries
from tests.support.waiting import until


class WordOverlapSearch:
    """A tiny in-memory "searching" adapter for the service tests (the benchmark uses Postgres)."""

    def __init__(self, docs: list[tuple[str, str]]) -> None:
        self.docs = docs

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        assert op == "searching"
        out = []
        for r in requests:
            words = set(r["query"].lower().split())
            scored = sorted(
                ((len(words & set(t.lower().split())), title, t) for title, t in self.docs), reverse=True
            )
            out.append(
                [{"title": ti, "text": t, "score": float(s)} for s, ti, t in scored[: r["top_k"]] if s]
            )
        return out


def test_lognormal_fit_reproduces_the_published_percentiles():
    rng = random.Random(7)
    xs = [SEARCH_LATENCY.sample(rng) for _ in range(40_000)]
    assert percentile(xs, 50) == pytest.approx(0.8, rel=0.03)
    assert percentile(xs, 95) == pytest.approx(2.2, rel=0.05)
    assert statistics.fmean(xs) == pytest.approx(SEARCH_LATENCY.mean, rel=0.03)
    assert SEARCH_LATENCY.sigma == pytest.approx(math.log(2.75) / 1.6449, rel=1e-3)


@pytest.mark.parametrize("p50, p95", [(0, 1), (1, 1), (2, 1), (-1, 2)])
def test_lognormal_rejects_bad_percentiles(p50, p95):
    with pytest.raises(ValueError, match="p50 < p95"):
        Lognormal(p50, p95)


def test_delays_are_seeded_per_endpoint():
    a, b = Delays(3), Delays(3)
    seq_a = [a.next("weather") for _ in range(5)]
    for _ in range(7):
        b.next("search")  # other endpoints' calls do not shift this endpoint's stream
    assert [b.next("weather") for _ in range(5)] == seq_a
    assert [Delays(4).next("weather") for _ in range(1)] != seq_a[:1]
    assert Delays(3, scale=0).next("search") == 0.0
    with pytest.raises(ValueError, match="scale"):
        Delays(0, scale=-1)


def _client() -> httpx.AsyncClient:
    docs = [("Paris", "Paris is the capital of France"), ("Mozart", "Wolfgang Amadeus Mozart was a composer")]
    app = create_service(WordOverlapSearch(docs), Delays(0, scale=0))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc")


async def test_search_endpoint_answers_in_the_remote_search_wire_format():
    async with _client() as c:
        r = await c.get("/search", params={"q": "capital of France", "top_k": 1})
        assert r.status_code == 200
        assert r.json() == {
            "results": [{"title": "Paris", "text": "Paris is the capital of France", "score": 3.0}]
        }
        assert (await c.get("/search", params={"q": "   "})).status_code == 422
        assert (await c.get("/search", params={"q": "x", "top_k": 0})).status_code == 422
        assert (await c.get("/search")).status_code == 422
        assert (await c.get("/healthz")).json()["calls"]["search"] == 1


async def test_tool_endpoints_compute_and_reject_bad_arguments():
    async with _client() as c:
        assert (await c.get("/tools/calculator", params={"expression": "17*23"})).json() == 391
        conv = (
            await c.get("/tools/convert_units", params={"value": "10", "from_unit": "km", "to_unit": "m"})
        ).json()
        assert conv == 10000.0
        assert (await c.get("/tools/weather", params={"city": "Oslo"})).json() == weather("Oslo")
        wiki = (await c.get("/tools/wiki_lookup", params={"query": "who was Mozart"})).json()
        assert wiki["title"] == "Mozart"
        bad = await c.get("/tools/calculator", params={"expression": "__import__('os')"})
        assert bad.status_code == 422 and "calculator" in bad.json()["detail"]
        assert (
            await c.get("/tools/convert_units", params={"value": "1", "from_unit": "km"})
        ).status_code == 422
        assert (await c.get("/tools/weather", params={"city": " "})).status_code == 422


def test_weather_is_deterministic_and_plausible():
    w = weather("Lima")
    assert w == weather(" lima ".title()) | {"city": "Lima"}
    assert -5 <= w["temperature_c"] <= 31 and 30 <= w["humidity_pct"] < 90
    assert w["text"] == f"Weather in Lima: {w['sky']}, {w['temperature_c']} C, humidity {w['humidity_pct']}%."


async def test_tool_engine_calls_the_service_through_its_http_path():
    """The tool engine's HTTP tools reach the service (one uvicorn server on loopback)."""
    import asyncio
    import socket

    import uvicorn

    from engines.tools.tool_engine import ToolBatchError, ToolEngine

    app = create_service(WordOverlapSearch([("Oslo", "Oslo is the capital of Norway")]), Delays(0, scale=0))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    task = asyncio.create_task(srv.serve(sockets=[sock]))
    await until(lambda: srv.started)
    engine = ToolEngine(
        "tools", defaults=False, http_tools=tool_specs(f"http://127.0.0.1:{sock.getsockname()[1]}")
    )
    await engine.start()
    try:
        out = await engine.execute(
            "tool",
            [
                {"tool": "calculator", "args": {"expression": "2+3"}},
                {"tool": "convert_units", "args": {"value": 1, "from_unit": "h", "to_unit": "min"}},
                {"tool": "wiki_lookup", "args": {"query": "Oslo"}},
            ],
        )
        assert out[0] == 5 and out[1] == 60.0
        assert out[2]["title"] == "Oslo"
        with pytest.raises(ToolBatchError, match="HTTP 422"):
            await engine.execute("tool", [{"tool": "weather", "args": {"town": "Oslo"}}])
    finally:
        await engine.stop()
        srv.should_exit = True
        await task
        sock.close()
    assert sorted(t["name"] for t in engine.tools()) == sorted(TOOL_ARGS)


def test_tool_queries_are_seeded_and_need_two_different_tools():
    qs = tool_queries(30, seed=2)
    assert qs == tool_queries(30, seed=2) and qs != tool_queries(30, seed=3)
    for q in qs:
        assert len(set(q["needs"])) == 2 and set(q["needs"]) <= set(TOOL_ARGS)
        assert q["question"].endswith("?") and ", and " in q["question"]
    single = tool_queries(10, seed=0, tools=1, kinds=("weather", "convert_units"))
    assert all(len(q["needs"]) == 1 and q["needs"][0] in ("weather", "convert_units") for q in single)
    with pytest.raises(ValueError, match="kinds"):
        tool_queries(1, tools=2, kinds=("weather",))
