"""How the tool engine (engines.tools.tool_engine) calls one HTTP tool over its pooled client: the call's
URL and body, a retry of an idempotent call (a dropped keep-alive connection; a 429 or 5xx answer),
the answer's body read up to the engine's bound, and errors whose messages never show the URL or the
response body (those go to the log, logger "teola.engines")."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from engines.http_retry import RetryPolicy
from engines.tools.http_url import call_url
from engines.tools.tool import Tool, ToolHTTPError

log = logging.getLogger("teola.engines")

HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


def without_query(url: str) -> str:
    """A URL as it may be logged: no query string or fragment (an API key may be there)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


@dataclass(slots=True)
class _Reply:
    """An HTTP tool's answer; `body` None: larger than the engine's max_response_bytes."""

    status: int
    content_type: str
    encoding: str
    body: bytes | None = None
    retry_after: str | None = None


async def call_http(
    client: Any, retry: RetryPolicy, max_response_bytes: int, tool: Tool, args: dict[str, Any]
) -> Any:
    """Call HTTP tool `tool` with `args` over `client`: the URL filled (engines.tools.http_url), the
    rest of the args as query parameters or a JSON body, an idempotent call retried by `retry`, the
    answer decoded (JSON or text). Failures raise ToolHTTPError with a message safe for the tenant;
    their URL and body are only logged."""
    import httpx

    assert tool.url is not None
    url, rest = call_url(tool.url, args)
    kwargs: dict[str, Any] = {"headers": tool.headers}
    where = f"{tool.method} {without_query(url)}"
    try:
        if tool.method in ("GET", "DELETE"):
            # merged into the URL's own query: httpx's params= would replace it (placeholders there included)
            url = str(
                httpx.URL(url).copy_merge_params(
                    {k: v if isinstance(v, str) else json.dumps(v) for k, v in rest.items()}
                )
            )
        else:
            kwargs["json"] = rest
        if tool.idempotent:
            reply = await retry.call(
                lambda: _request(client, max_response_bytes, tool.method, url, kwargs, True),
                lambda r: r.status,
                lambda r: r.retry_after,
                f"tool {tool.name}: {where}",
            )
        else:
            reply = await _request(client, max_response_bytes, tool.method, url, kwargs, False)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        log.warning("tool %s: %s failed: %s: %s", tool.name, where, type(exc).__name__, exc)
        raise ToolHTTPError(f"request failed ({type(exc).__name__})") from None
    if reply.body is None:
        log.warning("tool %s: %s answered more than %d bytes", tool.name, where, max_response_bytes)
        raise ToolHTTPError(f"response larger than {max_response_bytes} bytes")
    if not 200 <= reply.status < 300:
        log.warning("tool %s: HTTP %d from %s: %r", tool.name, reply.status, where, reply.body[:200])
        raise ToolHTTPError(f"HTTP {reply.status}")
    if reply.content_type.split(";")[0].strip().endswith("json"):
        return json.loads(reply.body)
    try:
        return reply.body.decode(reply.encoding, errors="replace")
    except LookupError:  # a charset Python does not know
        return reply.body.decode("utf-8", errors="replace")


async def _request(
    client: Any, max_response_bytes: int, method: str, url: str, kwargs: dict[str, Any], idempotent: bool
) -> _Reply:
    """One HTTP request, its body read up to `max_response_bytes`. An
    idempotent one is sent once more if the server closed a pooled keep-alive connection just as
    it was reused (httpx's "Server disconnected without sending a response": the request never
    reached the tool, as urllib3 also assumes when it retries)."""
    import httpx

    try:
        return await _read(client, max_response_bytes, method, url, kwargs)
    except httpx.RemoteProtocolError:
        if not idempotent:
            raise
        return await _read(client, max_response_bytes, method, url, kwargs)


async def _read(
    client: Any, max_response_bytes: int, method: str, url: str, kwargs: dict[str, Any]
) -> _Reply:
    async with client.stream(method, url, **kwargs) as response:
        reply = _Reply(
            response.status_code,
            response.headers.get("content-type", ""),
            response.charset_encoding or "utf-8",
            retry_after=response.headers.get("retry-after"),
        )
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > max_response_bytes:
                return reply
        reply.body = bytes(body)
        return reply
