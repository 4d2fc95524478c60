"""uvicorn's HTTP protocols with JSON error bodies: a request uvicorn itself cannot parse (malformed
request line or headers, an oversized URL or header block) is answered 400 with the server's error
shape ``{"error": "bad_http_request", "detail": ...}`` instead of uvicorn's plain text.

`uvicorn_options()` gives the ``http=`` option for `uvicorn.Config` / `uvicorn.run`."""

from __future__ import annotations

import json
from typing import Any


def _json_400(msg: str) -> bytes:
    body = json.dumps(
        {"error": "bad_http_request", "detail": f"the HTTP request could not be parsed: {msg}"}
    ).encode()
    head = (
        b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n"
    )
    return head + body


class _JsonErrors:
    transport: Any

    def send_400_response(self, msg: str) -> None:
        self.transport.write(_json_400(msg))
        self.transport.close()


def protocol_class() -> type:
    """The HTTP protocol uvicorn would pick ("auto": httptools when installed, else h11), with
    JSON 400 answers."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base
    return type(f"JsonErrors{Base.__name__}", (_JsonErrors, Base), {})


def uvicorn_options() -> dict[str, Any]:
    """Keyword options for `uvicorn.Config` / `uvicorn.run` that make the server's own 400s JSON."""
    return {"http": protocol_class()}
