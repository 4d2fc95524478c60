"""Retries of 429/5xx answers (engines.http_retry) in the HTTP tools and the remote search engine,
against a loopback server that answers each path's scripted statuses first, then 200."""

from __future__ import annotations

import email.utils
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engines.http_retry import RetryPolicy, retry_after_seconds
from engines.search.remote_search import RemoteSearchEngine, RemoteSearchError
from engines.tools.tool_engine import ToolBatchError, ToolEngine


class Scripted(BaseHTTPRequestHandler):
    """Answers a path's scripted (status, Retry-After) pairs in turn, then 200 with search-shaped JSON;
    counts the requests per path (without the query)."""

    script: dict[str, list[tuple[int, str | None]]] = {}
    seen: dict[str, int] = {}

    def _any(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?")[0]
        self.seen[path] = self.seen.get(path, 0) + 1
        queue = self.script.get(path) or []
        status, retry_after = queue.pop(0) if queue else (200, None)
        body = json.dumps({"results": [{"text": "hit"}]} if status == 200 else {"error": "busy"}).encode()
        self.send_response(status)
        if retry_after is not None:
            self.send_header("Retry-After", retry_after)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _any

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    handler = type("Handler", (Scripted,), {"script": {}, "seen": {}})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield handler, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


async def _call_tool(base: str, method: str = "GET", path: str = "/t", **options):
    idempotent = options.pop("idempotent", None)
    spec = {"name": "t", "url": base + path, "method": method} | (
        {"idempotent": idempotent} if idempotent is not None else {}
    )
    tools = ToolEngine("tools", defaults=False, http_tools=[spec], **options)
    await tools.start()
    try:
        return await tools.call("t")
    finally:
        await tools.stop()


def _waits(caplog) -> list[float]:
    """The waits the retry policy chose, as it logged them ("retry i of n in X s")."""
    return [
        float(r.getMessage().rsplit(" in ", 1)[1].split()[0])
        for r in caplog.records
        if "; retry " in r.getMessage()
    ]


async def test_a_429_is_retried_after_the_seconds_its_retry_after_asks(server, caplog):
    handler, base = server
    handler.script["/t"] = [(429, "1")]
    start = time.monotonic()
    with caplog.at_level("WARNING"):
        assert await _call_tool(base) == {"results": [{"text": "hit"}]}
    assert handler.seen["/t"] == 2 and _waits(caplog) == [1.0]
    assert time.monotonic() - start >= 0.95  # the wait is slept, not only logged


async def test_a_503_is_retried_with_backoff(server, caplog):
    handler, base = server
    handler.script["/t"] = [(503, None)]
    with caplog.at_level("WARNING"):
        assert await _call_tool(base, method="PUT") == {"results": [{"text": "hit"}]}
    waits = _waits(caplog)
    assert handler.seen["/t"] == 2 and len(waits) == 1 and 0 < waits[0] < 0.9


async def test_a_post_is_not_retried_unless_the_tool_says_it_is_idempotent(server):
    handler, base = server
    handler.script["/t"] = [(503, None)]
    with pytest.raises(ToolBatchError, match="HTTP 503"):
        await _call_tool(base, method="POST")
    assert handler.seen["/t"] == 1
    handler.script["/p"] = [(503, None)]
    assert await _call_tool(base, method="POST", path="/p", idempotent=True) == {"results": [{"text": "hit"}]}
    assert handler.seen["/p"] == 2


async def test_attempts_are_bounded_and_the_last_status_is_the_error(server):
    handler, base = server
    handler.script["/t"] = [(502, "0")] * 5
    with pytest.raises(ToolBatchError, match="HTTP 502"):
        await _call_tool(base, retries=2)
    assert handler.seen["/t"] == 3
    handler.script["/off"] = [(503, None)]
    with pytest.raises(ToolBatchError, match="HTTP 503"):
        await _call_tool(base, path="/off", retries=0)
    assert handler.seen["/off"] == 1


async def test_a_retry_after_beyond_the_wait_budget_is_not_waited_for(server, caplog):
    handler, base = server
    handler.script["/t"] = [(429, "30")]
    with caplog.at_level("WARNING"), pytest.raises(ToolBatchError, match="HTTP 429"):
        await _call_tool(base, max_retry_wait=2)
    assert handler.seen["/t"] == 1 and _waits(caplog) == []


async def test_a_client_error_other_than_429_is_not_retried(server):
    handler, base = server
    handler.script["/t"] = [(404, None)]
    with pytest.raises(ToolBatchError, match="HTTP 404"):
        await _call_tool(base)
    assert handler.seen["/t"] == 1


@pytest.mark.parametrize("first", [(429, "1"), (503, None)])
async def test_the_remote_search_engine_retries_429_and_503(server, first):
    handler, base = server
    handler.script["/search"] = [first]
    engine = RemoteSearchEngine("web", url=base + "/search")
    await engine.start()
    try:
        hits = await engine.execute("searching", [{"query": "alpha", "top_k": 2}])
    finally:
        await engine.stop()
    assert hits == [[{"text": "hit", "score": 0.0, "title": ""}]] and handler.seen["/search"] == 2


async def test_the_remote_search_engine_reports_the_status_once_retries_run_out(server):
    handler, base = server
    handler.script["/search"] = [(503, "0")] * 3
    engine = RemoteSearchEngine("web", url=base + "/search", retries=1)
    await engine.start()
    try:
        with pytest.raises(RemoteSearchError, match="HTTP 503$"):
            await engine.execute("searching", [{"query": "alpha", "top_k": 2}])
    finally:
        await engine.stop()
    assert handler.seen["/search"] == 2


def test_retry_after_is_seconds_or_an_http_date():
    now = time.time()
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(email.utils.formatdate(now + 10, usegmt=True), now=now) == pytest.approx(
        10, abs=1
    )
    assert retry_after_seconds(email.utils.formatdate(now - 10, usegmt=True), now=now) == 0.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


@pytest.mark.parametrize(
    "retries, wait, message",
    [
        (-1, 5, "option retries=-1 must be an int >= 0"),
        (True, 5, "option retries=True"),
        (2, -1, "option max_retry_wait=-1 must be a number of seconds >= 0"),
    ],
)
def test_retry_options_are_validated_naming_the_option(retries, wait, message):
    with pytest.raises(ValueError, match=message):
        RetryPolicy.from_options("web", retries, wait)
    with pytest.raises(ValueError, match=message):
        ToolEngine("tools", retries=retries, max_retry_wait=wait)
    with pytest.raises(ValueError, match=message):
        RemoteSearchEngine("web", url="http://127.0.0.1:1/search", retries=retries, max_retry_wait=wait)


def test_idempotent_must_be_a_bool():
    with pytest.raises(ValueError, match="idempotent='yes' must be true, false or left out"):
        ToolEngine(
            "tools",
            http_tools=[{"name": "t", "url": "http://127.0.0.1:1/x", "method": "POST", "idempotent": "yes"}],
        )
