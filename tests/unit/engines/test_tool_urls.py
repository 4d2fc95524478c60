"""HTTP tools against what a steered model may send (security review, issue 71): a path argument stays
one segment and never climbs the path, the query parameters written in a tool's URL cannot be
replaced by arguments, a response body is read up to `max_response_bytes`; and the wikipedia
tool's `top_k` is bounded. A loopback server echoes the path and query each request arrived with."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
import pytest_asyncio

from engines.tools.tool_engine import ToolBatchError, ToolEngine

URL = "/v1/users/{id}/profile?api_key=SECRET&scope=read"


class Echo(BaseHTTPRequestHandler):
    def do_GET(self):
        parts = urlsplit(self.path)
        if parts.path == "/big":
            body, ctype = b"x" * 5000, "text/plain"
        else:
            body, ctype = (
                json.dumps({"path": parts.path, "query": parse_qs(parts.query)}).encode(),
                "application/json",
            )
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def base():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest_asyncio.fixture
async def tools(base):
    eng = ToolEngine(
        "tools",
        defaults=False,
        http_tools=[
            {"name": "profile", "url": base + URL},
            {"name": "search", "url": base + "/search?q={q}&limit=5"},
        ],
    )
    await eng.start()
    yield eng
    await eng.stop()


def error_of(info: pytest.ExceptionInfo) -> str:
    [failure] = info.value.failures
    return str(failure)


@pytest.mark.parametrize("value", ["..", ".", ""])
async def test_a_path_argument_cannot_climb_the_path(tools, value):
    with pytest.raises(ToolBatchError) as info:
        await tools.call("profile", id=value)
    assert f"id={value!r} would make a URL path segment" in error_of(info)


async def test_a_path_argument_is_one_encoded_segment(tools):
    got = await tools.call("profile", id="../../admin?x=1#y")
    assert got["path"] == "/v1/users/..%2F..%2Fadmin%3Fx%3D1%23y/profile"
    assert got["query"] == {"api_key": ["SECRET"], "scope": ["read"]}


@pytest.mark.parametrize("extra", [{"scope": "admin"}, {"api_key": "mine"}])
async def test_arguments_cannot_replace_the_urls_fixed_query_parameters(tools, extra):
    with pytest.raises(ToolBatchError) as info:
        await tools.call("profile", id="7", **extra)
    assert f"argument(s) {next(iter(extra))!r} set a query parameter the tool's URL fixes" in error_of(info)
    with pytest.raises(ToolBatchError, match="limit"):
        await tools.call("search", q="whales", limit=500)


async def test_query_placeholders_and_other_arguments_still_arrive(tools):
    got = await tools.call("search", q="blue & whale", lang="en")
    assert got == {"path": "/search", "query": {"q": ["blue & whale"], "limit": ["5"], "lang": ["en"]}}


async def test_a_response_body_is_read_up_to_max_response_bytes(base):
    tools = ToolEngine(
        "tools", defaults=False, max_response_bytes=1000, http_tools=[{"name": "big", "url": base + "/big"}]
    )
    await tools.start()
    try:
        with pytest.raises(ToolBatchError) as info:
            await tools.call("big")
        assert error_of(info) == "response larger than 1000 bytes"
    finally:
        await tools.stop()
    with pytest.raises(ValueError, match="max_response_bytes"):
        ToolEngine("tools", max_response_bytes=0)


def test_call_url_leaves_the_template_alone_without_placeholders():
    from engines.tools.http_url import call_url

    assert call_url("http://h/a/b?k=1", {"x": 2}) == ("http://h/a/b?k=1", {"x": 2})
    with pytest.raises(ValueError, match="missing argument"):
        call_url("http://h/{a}", {})


class FakeSearch:
    def __init__(self) -> None:
        self.requests: list[dict] = []

    async def execute(self, op, requests):
        self.requests += requests
        return [[{"title": "T", "text": "x", "score": 1.0}] * r["top_k"] for r in requests]


@pytest.mark.parametrize("top_k", [0, 11, 10**9, True, "3"])
def test_the_wikipedia_tools_top_k_is_bounded(top_k):
    from engines.tools.wikipedia import MAX_TOP_K, wikipedia_tool

    search = FakeSearch()
    with pytest.raises(ValueError, match=f"top_k=.*from 1 to {MAX_TOP_K}"):
        asyncio.run(wikipedia_tool(search)("Paris", top_k=top_k))
    assert search.requests == []
    assert len(asyncio.run(wikipedia_tool(search)("Paris", top_k=MAX_TOP_K))) == MAX_TOP_K
