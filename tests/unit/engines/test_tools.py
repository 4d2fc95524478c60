"""ToolEngine: Python and HTTP tools, timeouts, batch failures, the default tools."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
import pytest_asyncio

from engines.tools.tool_engine import (
    ToolBatchError,
    ToolEngine,
    add_days,
    calculator,
    convert_units,
    days_between,
    weekday,
)


class Handler(BaseHTTPRequestHandler):
    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        parts = urlsplit(self.path)
        if parts.path.startswith("/fail"):
            return self._send(500, b"boom", "text/plain")
        if parts.path.startswith("/slow"):
            time.sleep(float(parse_qs(parts.query)["s"][0]))
            return self._send(200, b"late", "text/plain")
        if parts.path.startswith("/text"):
            return self._send(200, b"plain words", "text/plain; charset=utf-8")
        body = {"path": parts.path, "query": parse_qs(parts.query)}
        self._send(200, json.dumps(body).encode(), "application/json")

    def do_POST(self):
        data = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._send(200, json.dumps({"path": self.path, "body": data}).encode(), "application/json")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def http_base():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.handle_error = lambda *_: None  # a timed-out client leaves the "hasty" reply nowhere to go
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest_asyncio.fixture
async def engine(http_base):
    eng = ToolEngine(
        "tools",
        timeout=5.0,
        http_tools=[
            {"name": "lookup", "url": http_base + "/items/{item}", "description": "GET an item"},
            {"name": "create", "url": http_base + "/items", "method": "POST"},
            {"name": "broken", "url": http_base + "/fail"},
            {"name": "words", "url": http_base + "/text"},
            {"name": "find", "url": http_base + "/find?q={q}&fixed=1"},
            {"name": "patient", "url": http_base + "/slow?s={s}", "timeout": 8},
            {"name": "hasty", "url": http_base + "/slow?s={s}", "timeout": 0.3},
        ],
    )

    async def slow(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"

    eng.register_tool("slow", slow, "sleeps", timeout=0.2)
    eng.register_tool("shout", lambda text: text.upper(), "upper-cases text (sync)")
    await eng.start()
    yield eng
    await eng.stop()


async def test_batch_runs_sync_async_and_http_tools(engine):
    results = await engine.execute(
        "tool",
        [
            {"tool": "calculator", "args": {"expression": "2 * (3 + 4) ** 2 / sqrt(16)"}},
            {"tool": "shout", "args": {"text": "hi"}},
            {"tool": "slow", "args": {"seconds": 0}},
            {"tool": "lookup", "args": {"item": "a b/../c?x=1", "lang": "en", "n": 3}},
            {"tool": "create", "args": {"name": "x", "tags": ["a", "b"]}},
            {"tool": "words", "args": {}},
        ],
    )
    assert results[:3] == [24.5, "HI", "done"]
    assert results[3] == {"path": "/items/a%20b%2F..%2Fc%3Fx%3D1", "query": {"lang": ["en"], "n": ["3"]}}
    assert results[4] == {"path": "/items", "body": {"name": "x", "tags": ["a", "b"]}}
    assert results[5] == "plain words"


async def test_query_placeholders_and_extra_args_both_reach_the_server(engine):
    got = await engine.call("find", q="blue whale", lang="en")
    assert got == {"path": "/find", "query": {"q": ["blue whale"], "fixed": ["1"], "lang": ["en"]}}


async def test_an_http_tool_waits_as_long_as_its_own_timeout(engine):
    # longer than the HTTP client's 5 s default, shorter than the tool's 8 s
    assert await engine.call("patient", s=5.5) == "late"
    with pytest.raises(ToolBatchError, match=r"hasty.*timed out after 0.3 s|timed out after 0.3 s"):
        await engine.call("hasty", s=1)


async def test_failures_are_attributed_per_request(engine):
    with pytest.raises(ToolBatchError) as info:
        await engine.execute(
            "tool",
            [
                {"tool": "shout", "args": {"text": "ok"}},
                {"tool": "broken", "args": {}},
                {"tool": "nope", "args": {}},
                {"tool": "slow", "args": {"seconds": 30}},
                {"tool": "calculator", "args": {"expression": "1/0"}},
                {"tool": "lookup", "args": {}},
            ],
        )
    failures = {f.index: (f.tool, str(f)) for f in info.value.failures}
    assert sorted(failures) == [1, 2, 3, 4, 5]
    assert "HTTP 500" in failures[1][1]
    assert failures[2][0] == "nope" and "known tools: add_days, broken, calculator" in failures[2][1]
    assert "timed out after 0.2 s" in failures[3][1]
    assert "division by zero" in failures[4][1]
    assert "missing argument(s) for the URL: item" in failures[5][1]
    assert "5 of 6 tool calls failed" in str(info.value)


async def test_failures_asked_back_as_results_come_back_as_error_text(engine):
    # what an agent's model reads ("on_error": "result", teola.compile.components.agent); others
    # still fail the batch
    out = await engine.execute(
        "tool",
        [
            {"tool": "shout", "args": {"text": "ok"}, "on_error": "result"},
            {"tool": "calculator", "args": {"expression": "1/0"}, "on_error": "result"},
            {"tool": "nope", "args": {}, "on_error": "result"},
            {"tool": "slow", "args": {"seconds": 30}, "on_error": "result"},
        ],
    )
    assert out[0] == "OK" and out[1].startswith("error: ") and "division by zero" in out[1]
    assert out[2].startswith("error: unknown tool 'nope'") and out[3] == "error: timed out after 0.2 s"
    with pytest.raises(ToolBatchError) as info:
        await engine.execute(
            "tool", [{"tool": "nope", "args": {}, "on_error": "result"}, {"tool": "nope", "args": {}}]
        )
    assert [f.index for f in info.value.failures] == [1]


async def test_results_must_be_json_and_args_a_dict(engine):
    engine.register_tool("setty", lambda: {1, 2})
    with pytest.raises(ToolBatchError, match="not JSON-serializable"):
        await engine.call("setty")
    with pytest.raises(ToolBatchError, match="'args' must be a dict"):
        await engine.execute("tool", [{"tool": "shout", "args": ["x"]}])
    with pytest.raises(ValueError, match="op 'searching'"):
        await engine.execute("searching", [])


def test_registration_is_validated():
    eng = ToolEngine("t", defaults=False)
    assert eng.tools() == []
    with pytest.raises(ValueError, match="scheme and host|path and query"):
        eng.register_http_tool("evil", "http://{host}/x")
    with pytest.raises(ValueError, match="absolute http"):
        eng.register_http_tool("ftp", "ftp://127.0.0.1/x")
    with pytest.raises(ValueError, match="method"):
        eng.register_http_tool("m", "http://127.0.0.1/x", method="TRACE")
    with pytest.raises(ValueError, match="plain argument name"):
        eng.register_http_tool("f", "http://127.0.0.1/{a.__class__}")
    with pytest.raises(ValueError, match="tool name"):
        eng.register_tool("bad name", print)
    with pytest.raises(ValueError, match="timeout"):
        ToolEngine("t", timeout=0)
    names = [t["name"] for t in ToolEngine("t").tools()]
    assert names == ["add_days", "calculator", "convert_units", "days_between", "today", "weekday"]


@pytest.mark.parametrize(
    "expr, value",
    [
        ("1 + 2 * 3", 7),
        ("-(2 ** 10) // 3", -342),
        ("7 % 4 + 0.5", 3.5),
        ("max(1, 4, 2) + abs(-3)", 7),
        ("round(pi, 3)", 3.142),
        ("2 ** -1", 0.5),
        ("10 / 4", 2.5),
    ],
)
def test_calculator_arithmetic(expr, value):
    assert calculator(expr) == value


@pytest.mark.parametrize(
    "expr, message",
    [
        ("__import__('os').system('id')", "unsupported syntax"),
        ("(1).__class__", "unsupported syntax"),
        ("open('x')", "unsupported syntax"),
        ("'a' * 3", "unsupported syntax"),
        ("9 ** 9 ** 9", "too large"),
        ("10.0 ** 400", "too large"),
        ("1 +", "cannot parse"),
        ("(" * 300 + "1" + ")" * 300, "cannot parse"),
        ("-" * 990 + "1", "nested too deeply|cannot parse"),
        ("1" * 1001, "longer than 1000"),
        ("(-8) ** 0.5", "finite real"),
    ],
)
def test_calculator_rejects(expr, message):
    with pytest.raises(ValueError, match=message):
        calculator(expr)


def test_units_and_dates():
    assert convert_units(1, "mi", "km") == pytest.approx(1.609344)
    assert convert_units(100, "C", "F") == pytest.approx(212)
    assert convert_units(1, "GiB", "MB") == pytest.approx(1073.741824)
    with pytest.raises(ValueError, match="cannot convert length"):
        convert_units(1, "m", "kg")
    with pytest.raises(ValueError, match="unknown unit 'parsec'"):
        convert_units(1, "parsec", "m")
    assert add_days("2024-02-28", 2) == "2024-03-01"
    assert days_between("2024-01-01", "2025-01-01") == 366
    assert weekday("2000-01-01") == "Saturday"
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        weekday("01/02/2000")


class DropsFirst(BaseHTTPRequestHandler):
    """Closes the server's first connection after reading the request, without answering (what a
    server closing a stale keep-alive connection looks like to the client), and answers every later
    request with a small JSON body."""

    seen = 0

    def _any(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))  # a clean close, not a reset
        type(self).seen += 1
        if type(self).seen > 1:
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    do_GET = do_POST = _any

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("method, retried", [("GET", True), ("POST", False)])
def test_an_idempotent_http_tool_is_sent_again_when_the_server_drops_the_connection_unanswered(
    method, retried
):
    handler = type("Drops", (DropsFirst,), {"seen": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    async def main():
        tools = ToolEngine(
            "tools",
            http_tools=[
                {"name": "t", "url": f"http://127.0.0.1:{server.server_address[1]}/x", "method": method}
            ],
        )
        await tools.start()
        try:
            return await tools.execute("tool", [{"tool": "t", "args": {}}])
        finally:
            await tools.stop()

    try:
        if retried:
            assert asyncio.run(main()) == [{"ok": True}] and handler.seen == 2
        else:
            with pytest.raises(ToolBatchError, match="RemoteProtocolError"):
                asyncio.run(main())
            assert handler.seen == 1
    finally:
        server.shutdown()
        server.server_close()
