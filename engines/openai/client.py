"""The connection every adapter for an OpenAI-compatible server (`vllm serve` and others) holds: the
official `openai` async client for the API routes (pooled connections, streaming, `extra_body` for
fields the OpenAI API lacks, and its retries: connection errors, 408/409/429 and 5xx answers,
jittered exponential backoff from 0.5 s to 8 s, honouring `Retry-After`; a streamed request is
never retried once its answer started), and a small httpx client for the routes outside `/v1`
that servers add (`/health`, vLLM's `/metrics` and `/server_info`). API errors become
`RemoteEngineError` naming the engine, the URL and the server's message (`RemoteContextTooLong`
when the prompt does not fit the model's context window).

Completions (`complete`, `stream`) go through the client's own request path (`post`: its retries,
auth headers and status errors) but come back as plain JSON dicts: the SDK's typed call walks every
token id of a pre-tokenized prompt through its parameter transform, and its stream builds a pydantic
model per chunk, one chunk per token (measured: about 0.9 ms of client CPU per streamed token, most
of teola's client CPU per query on the remote path: `python -m bench client_cpu`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx

from engines.request_checks import ContextTooLong

# the routes outside /v1 answer at once or not at all: a short timeout keeps health probes and
# start-up probes from hanging on a stuck server
PROBE_TIMEOUT = 10.0


def _context_overflow(exc: Any, message: str) -> bool:
    """Whether a server's 400 says the prompt does not fit its context window (OpenAI's code, or
    vLLM's message, which carries no code)."""
    return getattr(exc, "code", None) == "context_length_exceeded" or "maximum context length" in message


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What a broken connection raises while a response body is read (the openai client's transport
    is httpx, or httpx2 in its newer releases)."""
    try:
        import httpx2
    except ImportError:
        return (httpx.TransportError,)
    return (httpx.TransportError, httpx2.TransportError)


class RemoteEngineError(RuntimeError):
    """The remote server could not be reached, or answered a request with an error."""


class RemoteContextTooLong(RemoteEngineError, ContextTooLong):
    """The remote server refused a request whose prompt does not fit its model's context window."""


def check_client_options(
    name: str, url: Any, timeout: Any, connect_timeout: Any, retries: Any, max_connections: Any
) -> str:
    """Validate the connection options every remote adapter takes; returns the base URL without a
    trailing slash or `/v1`. ValueError naming the option otherwise."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(
            f"engine {name!r}: option url must be the server's base URL such as "
            f"'http://gpu-box:8000' (with or without /v1), got {url!r}"
        )
    for field, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(
                f"engine {name!r}: option {field} must be a positive number of seconds, got {value!r}"
            )
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"engine {name!r}: option retries must be an int >= 0, got {retries!r}")
    if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
        raise ValueError(
            f"engine {name!r}: option max_connections must be a positive int, got {max_connections!r}"
        )
    base = url.rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


class RemoteClient:
    """One server: `api` (an `openai.AsyncOpenAI` on `<base>/v1`) and `get` for its other routes."""

    def __init__(
        self,
        name: str,
        base_url: str,
        api_key: str | None,
        timeout: float,
        connect_timeout: float,
        retries: int,
        max_connections: int,
    ) -> None:
        import openai

        self.name = name
        self.base_url = base_url
        self.retries = retries
        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        timeouts = openai.Timeout(timeout, connect=connect_timeout)
        self.api = openai.AsyncOpenAI(
            base_url=f"{base_url}/v1",
            api_key=api_key or "none",
            max_retries=retries,
            timeout=timeouts,
            http_client=openai.DefaultAsyncHttpxClient(limits=limits, timeout=timeouts),
        )
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=PROBE_TIMEOUT)

    async def get(self, path: str) -> httpx.Response | None:
        """GET a route outside the API (no retries); None when the server cannot be reached."""
        try:
            return await self.http.get(path)
        except httpx.HTTPError:
            return None

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /v1/completions with the JSON `body` (not streamed); the answer as a dict."""
        response = await self.api.post("/completions", body=body, cast_to=httpx.Response)
        return json.loads(response.content)

    async def stream(self, body: dict[str, Any]) -> AsyncGenerator[dict[str, Any], None]:
        """POST /v1/completions with the JSON `body` (which asks for a stream); each server-sent
        event's data as a dict. Closing the iterator closes the connection (vLLM then aborts the
        request); after "[DONE]" the body is read to its end, so the connection is reused."""
        streamed: bool = True
        response = await self.api.post("/completions", body=body, cast_to=httpx.Response, stream=streamed)
        done = False
        try:
            data: list[bytes] = []
            rest = b""
            async for block in response.aiter_bytes():
                *lines, rest = (rest + block).split(b"\n")
                for line in lines:
                    line = line.rstrip(b"\r")
                    if line.startswith(b"data:"):
                        data.append(line[6:] if line[5:6] == b" " else line[5:])
                    elif not line and data:  # a blank line ends an event
                        event, data = b"\n".join(data), []
                        done = done or event.strip() == b"[DONE]"
                        if not done:
                            yield self._chunk(event)
            if data and not done and b"\n".join(data).strip() != b"[DONE]":
                yield self._chunk(b"\n".join(data))
        except _transport_errors() as exc:
            raise RemoteEngineError(
                f"engine {self.name!r}: {self.base_url}/v1/completions: the stream broke: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        finally:
            await response.aclose()

    def _chunk(self, event: bytes) -> dict[str, Any]:
        """One streamed event's JSON; an error the server sends in the stream (vLLM does after the
        headers are out) raises RemoteEngineError with its message."""
        chunk = json.loads(event)
        error = chunk.get("error") if isinstance(chunk, dict) else None
        if error:
            message = error.get("message") if isinstance(error, dict) else error
            raise RemoteEngineError(
                f"engine {self.name!r}: {self.base_url}/v1/completions failed while streaming: "
                f"{str(message)[:500]}"
            )
        return chunk

    def error(self, route: str, exc: Exception) -> RemoteEngineError:
        """`exc` from the openai client as a RemoteEngineError naming the engine, URL and cause."""
        import openai

        where = f"engine {self.name!r}: {self.base_url}/v1/{route}"
        if isinstance(exc, openai.APIStatusError):
            body = exc.body.get("message", exc.body) if isinstance(exc.body, dict) else exc.message
            if exc.status_code == 400 and _context_overflow(exc, str(body)):
                return RemoteContextTooLong(f"{where}: {str(body)[:500]}")
            return RemoteEngineError(f"{where} answered HTTP {exc.status_code}: {str(body)[:500]}")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return RemoteEngineError(
                f"{where} failed after {self.retries + 1} attempts: {type(cause).__name__}: {cause}"
            )
        return RemoteEngineError(f"{where} failed: {type(exc).__name__}: {exc}")

    async def aclose(self) -> None:
        await self.api.close()
        await self.http.aclose()
