"""The remote search adapter's errors reach the tenant (security review, issue 71): a failing search
API's status is named, its response body is not (it is logged). A loopback server answers 503 and
a non-JSON 200, each with a body holding a marker."""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engines.search.remote_search import RemoteSearchEngine, RemoteSearchError

MARKER = "INTERNAL-TRACE-71"


class Failing(BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"Traceback (most recent call last): {MARKER}".encode()
        self.send_response(503 if self.path.startswith("/broken") else 200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def base():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("path, cause", [("/broken", "HTTP 503"), ("/text", "the response is not JSON")])
async def test_errors_name_the_status_not_the_body(base, path, cause, caplog):
    engine = RemoteSearchEngine("web", url=base + path)
    await engine.start()
    try:
        with (
            caplog.at_level(logging.WARNING, logger="teola.engines"),
            pytest.raises(RemoteSearchError) as info,
        ):
            await engine.execute("searching", [{"query": "alpha", "top_k": 2}])
    finally:
        await engine.stop()
    assert str(info.value).endswith(cause) and MARKER not in str(info.value)
    assert any(MARKER in r.getMessage() for r in caplog.records)
