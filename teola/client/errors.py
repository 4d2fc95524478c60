"""What the client raises: one exception per family of the server's error answers, each carrying
the HTTP status, the server's error code and its message (``{"error": code, "detail": message}``).

    TeolaError
    ├── APIConnectionError       the server could not be reached, or the connection broke
    └── APIError                 the server answered an error (status, code, message, retry_after)
        ├── AuthenticationError  401: missing or wrong API key
        ├── NotFoundError        404: unknown app, document, namespace or endpoint
        ├── InvalidRequestError  400, 413, 415, 422 and other 4xx: the request itself is wrong
        ├── RateLimitError       429: over a per-tenant limit (retry_after from Retry-After)
        └── ServerError          5xx: 500, 502 (an engine failed the query)
            ├── UnavailableError 503: an engine restarting, engines not started, store unreachable
            └── TimeoutError     504: the query ran past its time limit (also a builtin TimeoutError)
"""

from __future__ import annotations

import builtins
import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx


class TeolaError(Exception):
    """Base of every exception `teola.client` raises."""


class APIConnectionError(TeolaError):
    """The server could not be reached (after the retries), or a connection broke mid-answer."""


class APIError(TeolaError):
    """An error answer of the server: `status` (HTTP), `code` (the server's machine-readable code,
    e.g. ``too_many_queries``), `message` (its detail, naming the problem and the fix), and
    `retry_after` (seconds the server asked to wait, from ``Retry-After``; None without one)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "",
        retry_after: float | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.retry_after = retry_after
        self.response = response

    def __str__(self) -> str:
        where = f"{self.status} " if self.status is not None else ""
        return f"{where}{self.code}: {self.message}" if self.code else f"{where}{self.message}"


class AuthenticationError(APIError):
    """401: the API key is missing or unknown (``Authorization: Bearer <key>``)."""


class NotFoundError(APIError):
    """404: unknown app, endpoint, document id or namespace (another tenant's ones included)."""


class InvalidRequestError(APIError):
    """400, 413, 415, 422 (and any other 4xx without its own class): the request is malformed, too
    large, or names an unknown config key or option; `message` names the field."""


class RateLimitError(APIError):
    """429: the caller's tenant is over a limit (``too_many_queries``, ``token_rate_exceeded``,
    ``quota_exceeded``); `retry_after` says when to try again."""


class ServerError(APIError):
    """5xx: a fault of the server (500) or an engine that failed the query (502)."""


class UnavailableError(ServerError):
    """503: an engine the query ran on is restarting, the engines are not started, or the documents'
    PostgreSQL cannot be reached; `retry_after` when the server gave one."""


class TimeoutError(ServerError, builtins.TimeoutError):  # noqa: A001 - the name callers expect
    """504: the query (compilation included) ran past its time limit; also raised, with `status`
    None, when the client's own timeout ran out. A builtin ``TimeoutError`` too."""


_BY_STATUS: dict[int, type[APIError]] = {
    401: AuthenticationError,
    403: AuthenticationError,
    404: NotFoundError,
    429: RateLimitError,
    503: UnavailableError,
    504: TimeoutError,
}


def error_class(status: int) -> type[APIError]:
    """The exception class of an error answer with HTTP `status`."""
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if 400 <= status < 500:
        return InvalidRequestError
    if status >= 500:
        return ServerError
    return APIError


def error_for(
    status: int,
    code: str,
    message: str,
    retry_after: float | None = None,
    response: httpx.Response | None = None,
) -> APIError:
    """The exception for `status`, the server's `code` and `message`."""
    return error_class(status)(message, status=status, code=code, retry_after=retry_after, response=response)


def error_from_response(response: httpx.Response) -> APIError:
    """The exception for an error answer (its body read). Reads teola's ``{"error", "detail"}``, the
    OpenAI-compatible door's ``{"error": {"message", "code"}}``, or any other body (a proxy's page)."""
    code, message = f"http_{response.status_code}", response.text[:500] or response.reason_phrase
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        code, message = body["error"], str(body.get("detail", message))
    elif isinstance(body, dict) and isinstance(body.get("error"), dict):
        inner = body["error"]
        code, message = (
            str(inner.get("code") or inner.get("type") or code),
            str(inner.get("message", message)),
        )
    return error_for(response.status_code, code, message, retry_after(response.headers), response)


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delay-seconds or an HTTP date; 0 for a date
    already past); None without the header or when it cannot be read."""
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def connection_error(exc: httpx.TransportError) -> TeolaError:
    """The client's exception for a transport failure: TimeoutError (status None) when the client's
    own timeout ran out, else APIConnectionError."""
    if isinstance(exc, httpx.TimeoutException):
        return TimeoutError(
            f"no answer within the client's timeout ({type(exc).__name__}: {exc})", code="client_timeout"
        )
    return APIConnectionError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
