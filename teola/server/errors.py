"""Errors as JSON: `ApiError` (status, code, detail), the handlers that answer every failure with
``{"error": code, "detail": message}`` (on the OpenAI-compatible door's paths, OpenAI's
``{"error": {"message", "type", "param", "code"}}``: teola.server.openai.errors), and the request
body size limit."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from teola.server.openai.errors import door_response, is_door_path
from teola.server.schemas import CONFIG_KEYS

log = logging.getLogger("teola.server")


class ApiError(Exception):
    """An error answered as ``{"error": code, "detail": detail}`` with an HTTP status. `param`: the
    request field it is about (OpenAI's error object names it; other paths do not show it)."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        headers: dict[str, str] | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers
        self.param = param


def error_response(path: str, exc: ApiError) -> JSONResponse:
    """The answer of `exc` on `path`: OpenAI's error object on the door's paths, else teola's."""
    if is_door_path(path):
        return door_response(exc.status, exc.code, exc.detail, exc.param, exc.headers)
    return JSONResponse(
        {"error": exc.code, "detail": exc.detail}, status_code=exc.status, headers=exc.headers
    )


def install_error_handlers(server: FastAPI) -> None:
    @server.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(request.url.path, exc)

    @server.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        code = "http_error"
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no endpoint {request.method} {request.url.path}; see /docs"
        elif exc.status_code == 400 and detail == "There was an error parsing the body":
            code = "malformed_json"  # FastAPI's message for bodies json.loads rejects with no position
            detail = "the request body could not be parsed as JSON (invalid UTF-8, or nested too deeply)"
        if is_door_path(request.url.path):
            return door_response(exc.status_code, code, detail, None, getattr(exc, "headers", None))
        return JSONResponse(
            {"error": code, "detail": detail},
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    @server.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # a bug or an input no check foresaw: still a JSON answer in the path's error shape, never plain text
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return error_response(
            request.url.path, ApiError(500, "internal_error", f"{type(exc).__name__}: {exc}"[:500])
        )

    @server.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, detail = _validation_message(exc.errors())
        if is_door_path(request.url.path):
            return door_response(status, "invalid_request", detail)
        return JSONResponse(
            {"error": "malformed_json" if status == 400 else "invalid_request", "detail": detail},
            status_code=status,
        )


def _validation_message(errors: list[dict[str, Any]]) -> tuple[int, str]:
    messages: list[str] = []
    unknown_config: list[str] = []
    for e in errors:
        loc = [str(x) for x in e.get("loc", ()) if x != "body"]
        where = ".".join(loc) or "request body"
        kind = e.get("type", "")
        if kind == "json_invalid":
            reason = (e.get("ctx") or {}).get("error", "invalid JSON")
            pos = e.get("loc", ())[-1] if len(e.get("loc", ())) > 1 else "?"
            return 400, f"malformed JSON body: {reason} at position {pos}"
        if kind == "extra_forbidden" and len(loc) == 2 and loc[0] == "config":
            unknown_config.append(loc[1])
        elif kind == "extra_forbidden":
            messages.append(f"{where}: unknown field")
        elif where == "request body" and kind in ("model_attributes_type", "dict_type"):
            messages.append(
                'request body must be a JSON object {"query": {"question": ...}, "config": {...}} '
                "sent with Content-Type: application/json"
            )
        elif kind == "missing":
            messages.append(
                f"{where}: field required"
                + (
                    ' (send JSON {"query": {"question": ...}, "config": {...}})'
                    if where == "request body"
                    else ""
                )
            )
        else:
            messages.append(f"{where}: {e.get('msg', kind)}")
    if unknown_config:
        messages.insert(
            0,
            f"unknown config key(s) {', '.join(repr(k) for k in unknown_config)}; "
            f"known keys: {', '.join(CONFIG_KEYS)}",
        )
    return 422, "; ".join(messages) or "invalid request"


QUOTA_RETRY_AFTER = 60  # seconds a client told 429 waits before it tries again


def quota_exceeded(detail: str) -> ApiError:
    """The answer to a request over one of its tenant's limits: 429 with ``Retry-After``, `detail`
    naming the limit, the tenant's usage, how to get under it, and the setting that sets it."""
    return ApiError(429, "quota_exceeded", detail, headers={"Retry-After": str(QUOTA_RETRY_AFTER)})


class BodyLimitMiddleware:
    """Rejects request bodies over `limit` bytes with 413 before the app reads them (by
    Content-Length when given, else by counting the bytes received), and bodies not received
    whole within `timeout` seconds with 408 (a slow client holds no memory for long)."""

    def __init__(self, app: Any, limit: int, timeout: float = 30.0) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await self._reject(scope, send, 413, "body_too_large", self._too_large(int(length)))
            return
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    body = message.get("body", b"")
                    size += len(body)
                    if size > self.limit:
                        await self._reject(scope, send, 413, "body_too_large", self._too_large(size))
                        return
                    chunks.append(body)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await self._reject(
                scope,
                send,
                408,
                "body_timeout",
                f"the request body was not received within "
                f"{self.timeout:g}s ({size} bytes came); send it whole at once (setting body_timeout, "
                "env TEOLA_BODY_TIMEOUT)",
            )
            return
        buffered = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return buffered
            return await receive()

        await self.app(scope, replay, send)

    def _too_large(self, size: int) -> str:
        return (
            f"request body of {size}+ bytes exceeds the limit of {self.limit} bytes (setting max_body_bytes, "
            "env TEOLA_MAX_BODY_BYTES)"
        )

    async def _reject(self, scope: dict, send: Callable, status: int, code: str, detail: str) -> None:
        path = scope.get("path", "")
        body = bytes(error_response(path, ApiError(status, code, detail)).body)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 408:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
