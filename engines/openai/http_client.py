"""HTTP plumbing shared by the adapters for OpenAI-compatible servers (`vllm serve` and others):
one pooled `httpx.AsyncClient` per adapter, timeouts, and retries with exponential backoff on
connection errors and on 502/503/504 answers (only before any response data has been read, so a
request is never run twice after it started streaming).
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

RETRY_STATUS = frozenset({502, 503, 504})
_RETRY_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.PoolTimeout)


class RemoteEngineError(RuntimeError):
    """The remote server could not be reached, or answered a request with an error."""


def check_client_options(name: str, url: Any, timeout: Any, connect_timeout: Any, retries: Any,
                         backoff: Any, max_connections: Any) -> str:
    """Validate the connection options every remote adapter takes; returns the base URL without a
    trailing slash. ValueError naming the option otherwise."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"engine {name!r}: option url must be the server's base URL such as "
                         f"'http://gpu-box:8000' (with or without /v1), got {url!r}")
    for field, value in (("timeout", timeout), ("connect_timeout", connect_timeout), ("backoff", backoff)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"engine {name!r}: option {field} must be a positive number of seconds, got {value!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"engine {name!r}: option retries must be an int >= 0, got {retries!r}")
    if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
        raise ValueError(f"engine {name!r}: option max_connections must be a positive int, got {max_connections!r}")
    base = url.rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


class RemoteClient:
    """A pooled client for one server: `post` (JSON in, JSON out), `stream_events` (server-sent
    events of a streaming request) and `get`, each retried on connection errors."""

    def __init__(self, name: str, base_url: str, api_key: str | None, timeout: float, connect_timeout: float,
                 retries: int, backoff: float, max_connections: int) -> None:
        self.name = name
        self.base_url = base_url
        self.retries = retries
        self.backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=httpx.Timeout(timeout, connect=connect_timeout),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections))
        self.attempts = 0  # requests sent, retries included (for tests and diagnostics)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _retrying(self, path: str, attempt):
        for k in range(self.retries + 1):
            self.attempts += 1
            try:
                return await attempt()
            except _RETRY_ERRORS as exc:
                error: Exception = exc
            except _RetryStatus as exc:
                error = exc
            if k < self.retries:
                await asyncio.sleep(self.backoff * 2 ** k)
        raise RemoteEngineError(f"engine {self.name!r}: {self.base_url}{path} failed after "
                                f"{self.retries + 1} attempts: {type(error).__name__}: {error}") from error

    async def get(self, path: str) -> httpx.Response:
        async def attempt() -> httpx.Response:
            response = await self.http.get(path)
            if response.status_code in RETRY_STATUS:
                raise _RetryStatus(response)
            return response
        return await self._retrying(path, attempt)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async def attempt() -> dict[str, Any]:
            response = await self.http.post(path, json=body)
            if response.status_code in RETRY_STATUS:
                raise _RetryStatus(response)
            self._raise_for(path, response, response.text)
            return response.json()
        return await self._retrying(path, attempt)

    @asynccontextmanager
    async def stream_events(self, path: str, body: dict[str, Any]) -> AsyncIterator[AsyncIterator[dict]]:
        """Open a streaming request; yields an iterator over the JSON payloads of its `data:` lines
        (ending at `[DONE]`). Leaving the block closes the connection, which makes vLLM abort the
        request if it is still running."""
        async def attempt():
            request = self.http.build_request("POST", path, json=body)
            response = await self.http.send(request, stream=True)
            if response.status_code in RETRY_STATUS:
                await response.aclose()
                raise _RetryStatus(response)
            if response.status_code >= 400:
                text = (await response.aread()).decode(errors="replace")
                await response.aclose()
                self._raise_for(path, response, text)
            return response

        response = await self._retrying(path, attempt)
        try:
            yield _events(response)
        finally:
            await response.aclose()

    def _raise_for(self, path: str, response: httpx.Response, text: str) -> None:
        if response.status_code < 400:
            return
        try:
            detail = json.loads(text).get("error", text)
            detail = detail.get("message", detail) if isinstance(detail, dict) else detail
        except (ValueError, AttributeError):
            detail = text
        raise RemoteEngineError(f"engine {self.name!r}: {self.base_url}{path} answered HTTP "
                                f"{response.status_code}: {str(detail)[:500]}")


class _RetryStatus(Exception):
    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")


async def _events(response: httpx.Response) -> AsyncIterator[dict]:
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        yield json.loads(data)
