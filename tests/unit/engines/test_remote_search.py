"""The remote search adapter (engines.search.remote_search) against real HTTP servers on loopback: results,
errors (status, timeout, refused connection, bad body), option validation, and kind "search"
choosing it when `url` is given."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engines.registry import create_engine, kind_defaults
from engines.search.remote_search import RemoteSearchEngine, RemoteSearchError
from tests.support.waiting import until


def _app() -> Any:
    from fastapi import FastAPI, Query
    from fastapi.responses import JSONResponse, PlainTextResponse

    app = FastAPI()
    app.state.release = asyncio.Event()  # set when the server stops: /slow never answers before
    app.state.searched = []  # each /search call's query

    @app.get("/search")
    async def search(q: str, top_k: int = Query(4)) -> dict:
        app.state.searched.append(q)
        return {
            "results": [
                {"title": f"t{i}", "text": f"{q} #{i}", "score": 1.0 / (i + 1)} for i in range(top_k + 2)
            ]
        }

    @app.get("/broken")
    async def broken(q: str) -> Any:
        return JSONResponse({"detail": "quota exceeded"}, status_code=503)

    @app.get("/slow")
    async def slow(q: str) -> dict:
        await app.state.release.wait()
        return {"results": []}

    @app.get("/text")
    async def text(q: str) -> Any:
        return PlainTextResponse("not json")

    @app.get("/shape")
    async def shape(q: str) -> dict:
        return {"results": [{"title": "no text"}]}

    return app


class Url(str):
    """The test server's base URL, with the queries its /search received (`searched`)."""

    def __new__(cls, url: str, searched: list[str]) -> Url:
        out = super().__new__(cls, url)
        out.searched = searched
        return out


@pytest.fixture
async def server() -> AsyncIterator[Url]:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    app = _app()
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    task = asyncio.create_task(srv.serve(sockets=[sock]))
    await until(lambda: srv.started or task.done())
    assert srv.started, "the test server exited during start-up"
    try:
        yield Url(f"http://127.0.0.1:{sock.getsockname()[1]}", app.state.searched)
    finally:
        app.state.release.set()
        srv.should_exit = True
        await task
        sock.close()


async def _search(url: str, **options: Any) -> Any:
    engine = RemoteSearchEngine("web", url=url, **options)
    await engine.start()
    try:
        return await engine.execute(
            "searching", [{"query": "alpha", "top_k": 2}, {"query": "beta", "top_k": 1}]
        )
    finally:
        await engine.stop()


async def test_batch_of_queries_returns_top_k_per_query(server):
    out = await _search(f"{server}/search")
    assert [[h["text"] for h in hits] for hits in out] == [["alpha #0", "alpha #1"], ["beta #0"]]
    assert out[0][0] == {"text": "alpha #0", "score": 1.0, "title": "t0"}


@pytest.mark.parametrize(
    "path, message",
    [("/broken", "HTTP 503"), ("/text", "not JSON"), ("/shape", "'text' string"), ("/missing", "HTTP 404")],
)
async def test_bad_answers_name_the_engine_and_the_cause(server, path, message):
    with pytest.raises(RemoteSearchError, match=message) as info:
        await _search(f"{server}{path}")
    assert "engine 'web'" in str(info.value) and path in str(info.value)


async def test_timeout_is_reported(server):
    with pytest.raises(RemoteSearchError, match="timed out after 0.3 s"):
        await _search(f"{server}/slow", timeout=0.3)


async def test_refused_connection_is_reported():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RemoteSearchError, match="cannot reach the search API"):
        await _search(f"http://127.0.0.1:{port}/search")


async def test_not_started_and_bad_requests_raise():
    engine = RemoteSearchEngine("web", url="http://127.0.0.1:9/search")
    with pytest.raises(RuntimeError, match="not started"):
        await engine.execute("searching", [{"query": "x", "top_k": 1}])
    await engine.start()
    try:
        with pytest.raises(ValueError, match="does not support op 'embedding'"):
            await engine.execute("embedding", [{"text": "x"}])
        with pytest.raises(ValueError, match="top_k"):
            await engine.execute("searching", [{"query": "x", "top_k": 0}])
    finally:
        await engine.stop()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"url": "ftp://x/search"}, "absolute http"),
        ({"url": "http://x/search?q=1"}, "query string"),
        ({"url": "http://x/s", "timeout": 0}, "timeout"),
        ({"url": "http://x/s", "max_connections": 0}, "max_connections"),
        ({"url": "http://x/s", "headers": {"k": 1}}, "headers"),
    ],
)
def test_options_are_validated(options, message):
    with pytest.raises(ValueError, match=message):
        RemoteSearchEngine("web", **options)


def test_kind_search_is_remote_with_url_and_local_without():
    remote = create_engine("s", "search", {"url": "http://127.0.0.1:1/search"})
    assert isinstance(remote, RemoteSearchEngine)
    from engines.search.text_search import TextSearchEngine

    assert isinstance(create_engine("s", "search", {}), TextSearchEngine)
    assert (
        kind_defaults("search", {"url": "http://h/s"})[1].max_batch == 1
    )  # one query per call, each its own batch
    assert kind_defaults("search", {})[1].max_batch == TextSearchEngine.default_profile.max_batch


async def test_no_call_at_start_and_no_costs_by_default(server):
    engine = RemoteSearchEngine("web", url=f"{server}/search")
    await engine.start()
    await engine.stop()
    assert server.searched == [] and engine.profile.op_costs == {}


async def test_costs_true_fits_a_searchs_cost_from_its_own_calls_at_start(server):
    from engines.llm_text.costs import FITTED

    engine = RemoteSearchEngine("web", url=f"{server}/search", costs=True)
    await engine.start()
    await engine.stop()
    cost = engine.profile.op_costs["searching"]
    assert cost["source"] == FITTED and cost["base_s"] + cost["item_s"] > 0 and cost["probe_s"] > 0
    # one warm-up call, then batches of 1, 2, 4 and 8 queries twice, one call per query, each unique
    assert len(server.searched) == 1 + 2 * (1 + 2 + 4 + 8) == len(set(server.searched))


async def test_a_profile_gives_the_costs_without_a_call(server):
    engine = RemoteSearchEngine("web", url=f"{server}/search", costs="a100-llama3.1-8b-measured")
    await engine.start()
    await engine.stop()
    assert server.searched == []
    assert engine.profile.op_costs["searching"]["base_s"] == 0.8


async def test_a_probe_against_a_dead_api_fails_the_start_and_says_how_to_skip_it():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = RemoteSearchEngine("web", url=f"http://127.0.0.1:{port}/search", costs=True)
    with pytest.raises(RemoteSearchError, match="cannot reach the search API.*cost probe.*costs=False"):
        await engine.start()
    assert not await engine.health()  # its client is closed again
    with pytest.raises(ValueError, match="option costs"):
        RemoteSearchEngine("web", url="http://x/s", costs="no-such-profile")
