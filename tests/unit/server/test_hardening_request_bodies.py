"""Request bodies cost nothing to callers without a key and cannot be dribbled in forever: the API
key is checked from the headers before any body byte is read (teola.server.auth), and a body not
received whole within ``body_timeout`` seconds is answered 408 (teola.server.errors)."""

from __future__ import annotations

import asyncio
import json

import pytest

from teola.server import ServerSettings, create_server
from tests.unit.server.test_server import make_echo_app

BODY = json.dumps({"query": {"question": "hi"}}).encode()


def scope(path: str, headers: list[tuple[bytes, bytes]]) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
    }


async def call(server, path: str, headers: list[tuple[bytes, bytes]], receive) -> tuple[int, dict, float]:
    """Drive the ASGI app directly; (status, JSON body, seconds taken)."""
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await asyncio.wait_for(server(scope(path, headers), receive, send), 10)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body), loop.time() - t0


@pytest.mark.parametrize("path", ["/v1/apps/echo/query", "/v1/apps/echo/documents", "/v1/chat/completions"])
async def test_a_caller_without_a_valid_key_is_refused_before_its_body_is_read(path):
    app, _ = make_echo_app()
    server = create_server(
        {"echo": app}, ServerSettings(api_keys="alpha:key-a", documents="memory", start_engines=False)
    )
    reads = []

    def client():
        messages = [{"type": "http.disconnect"}, {"type": "http.request", "body": BODY, "more_body": False}]

        async def receive() -> dict:
            reads.append(path)
            return messages.pop() if len(messages) > 1 else messages[0]  # the body, then the client is gone

        return receive

    for headers in ([], [(b"authorization", b"Bearer wrong")]):
        status, body, _ = await call(server, path, headers, client())
        assert status == 401, body
        assert "unauthorized" in json.dumps(body)
    assert reads == [], "the body of an unauthenticated request was read"
    status, _, _ = await call(server, path, [(b"authorization", b"Bearer key-a")], client())
    assert reads and status != 401


async def test_a_body_not_received_within_body_timeout_is_answered_408():
    app, _ = make_echo_app()
    server = create_server(
        {"echo": app}, ServerSettings(body_timeout=0.2, documents="memory", start_engines=False)
    )
    parts = [{"type": "http.request", "body": BODY[:5], "more_body": True}]

    async def receive() -> dict:
        if parts:
            return parts.pop()
        await asyncio.sleep(3600)  # a client that never sends the rest
        return {"type": "http.disconnect"}

    status, body, took = await call(server, "/v1/apps/echo/query", [], receive)
    assert status == 408 and body["error"] == "body_timeout" and "body_timeout" in body["detail"], body
    assert took < 2
