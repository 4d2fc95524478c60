"""Reading the server's HTTP answers in tests: server-sent events and Prometheus metric values."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from tests.support.waiting import until


def sse(text: str) -> list[tuple[str, dict]]:
    """A text/event-stream body as [(event kind, JSON data), ...] (comments, e.g. keep-alives, skipped)."""
    return [
        (
            block.split("\n")[0].removeprefix("event: "),
            json.loads(block.split("\n")[1].removeprefix("data: ")),
        )
        for block in text.strip().split("\n\n")
        if not block.startswith(":")
    ]


def metric(text: str, key: str) -> float:
    """The value of one sample (`name{labels}`) in a Prometheus exposition; 0 when absent."""
    for line in text.splitlines():
        if line.startswith(key + " "):
            return float(line.split()[-1])
    return 0.0


async def post_and_hang_up(
    server: Any, path: str, body: dict, hang_up_when: Callable[[], bool]
) -> list[dict]:
    """POST `body` straight to the ASGI app `server` at `path`; the client hangs up once
    `hang_up_when()` holds. Returns the ASGI messages the server sent."""
    raw = json.dumps(body).encode()
    messages = [{"type": "http.request", "body": raw, "more_body": False}]
    sent: list[dict] = []

    async def receive() -> dict:
        if messages:
            return messages.pop()
        await until(hang_up_when)
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("teola.test", 80),
    }
    await asyncio.wait_for(server(scope, receive, send), 10)
    return sent
