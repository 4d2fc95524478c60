"""Remote search engine: a web-search-style HTTP API behind the "searching" op.

`Engine("search", kind="search", url="http://host:port/search")` selects this adapter (without `url`
the kind is the local PostgreSQL full-text search, engines.search.text_search).

Wire format (one HTTP call per query, as public web-search APIs take one query per call):
`GET {url}?q=<query>&top_k=<k>` -> 200 with JSON `{"results": [{"text": str, "title": str,
"score": float}, ...]}` best first (`title` and `score` optional). A batch of queries runs as
concurrent calls over one pooled connection set (httpx, at most `max_connections` open).

Errors name the engine, the URL and the cause: a timeout (`timeout` seconds per call, default 10),
a refused connection, a non-2xx status, a body that is not the JSON above. They reach the tenant,
so they never quote the response body (its start is logged on "teola.engines" instead). Any failed
call fails the batch (the engine protocol); the other calls of the batch are cancelled. A call
answered 429 or 5xx is retried first (engines.http_retry: the search is a GET, so sending it again
is safe): up to `retries` times, each wait the answer's `Retry-After` or a jittered backoff, none
ending over `max_retry_wait` seconds after the first attempt; then its status is the error.

Options: url (required here), timeout (10 s per attempt), max_connections (64), headers (e.g. an
API key), retries (2; 0: never), max_retry_wait (5 s), max_batch (1), max_efficient_batch (1), costs
(False by default: none reported; True: a search's seconds per request and per query fitted at start
by a probe of 31 calls to the API, which must then be up; a profile's name or file: its `op_cost`
table for kind "search"; engines/machine/op_costs.py). Off by default because a hosted search API
bills or rate-limits every call and its latency is its provider's, not this machine's.
The API takes one query per call, so a batch would only make its calls wait for the slowest of them
(web-search latency is heavy-tailed): by default each search is its own batch, and up to 64 run
at once (EngineProfile.max_inflight), so each query's results come back when its own call does
(measured: bench/results/remote/sweep_mi4_sb1.md vs sweep_mi4_sb64.md, 0.80 vs 1.12 s of search per query
at 8 q/s).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from engines.http_retry import DEFAULT_MAX_RETRY_WAIT, DEFAULT_RETRIES, RetryPolicy
from engines.machine.op_costs import PROBE_SIZES, check_op_costs_option, engine_op_costs, probe_words
from engines.protocol import EngineProfile, StreamEvent, profile_with
from engines.request_checks import search_request
from engines.requests import PrimOp

log = logging.getLogger("teola.engines")


class RemoteSearchError(RuntimeError):
    """A call to the remote search API failed (timeout, connection, status or body)."""


def check_url(name: str, url: Any) -> str:
    """`url` if it is an absolute http(s) URL without a query string, else ValueError naming it."""
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(
            f"engine {name!r}: option url={url!r} must be an absolute http:// or https:// URL "
            f"of the search endpoint, e.g. 'http://127.0.0.1:8900/search'"
        )
    if parts.query or parts.fragment:
        raise ValueError(
            f"engine {name!r}: option url={url!r} must not carry a query string; the adapter adds "
            f"q= and top_k="
        )
    return url


def parse_results(body: Any, where: str) -> list[dict[str, Any]]:
    """The hits of one response body, as {"text", "score", "title"}; RemoteSearchError naming `where`
    when the body is not {"results": [{"text": str, ...}]}."""
    results = body.get("results") if isinstance(body, dict) else None
    if not isinstance(results, list):
        raise RemoteSearchError(f"{where}: the response must be a JSON object with a 'results' list")
    out = []
    for i, hit in enumerate(results):
        if not isinstance(hit, dict) or not isinstance(hit.get("text"), str):
            raise RemoteSearchError(f"{where}: results[{i}] must be an object with a 'text' string")
        score = hit.get("score", 0.0)
        if not isinstance(score, (int, float)) or isinstance(score, bool):
            raise RemoteSearchError(f"{where}: results[{i}].score must be a number, got {score!r}")
        out.append({"text": hit["text"], "score": float(score), "title": str(hit.get("title") or "")})
    return out


class RemoteSearchEngine:
    """Searches over a remote HTTP search API (op "searching"); see the module docstring."""

    ops = frozenset({PrimOp.SEARCHING})
    default_profile = EngineProfile(max_batch=1, max_efficient_batch=1, max_inflight=64)

    def __init__(
        self,
        name: str,
        *,
        url: str,
        timeout: float = 10.0,
        max_connections: int = 64,
        headers: dict[str, str] | None = None,
        retries: int = DEFAULT_RETRIES,
        max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
        max_batch: int | None = None,
        max_efficient_batch: int | None = None,
        costs: bool | str = False,
    ) -> None:
        self.name = name
        self.url = check_url(name, url)
        self.costs_option = check_op_costs_option(name, "search", self.ops, costs)
        if not (isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0):
            raise ValueError(
                f"engine {name!r}: option timeout={timeout!r} must be a positive number of seconds"
            )
        if not (
            isinstance(max_connections, int) and not isinstance(max_connections, bool) and max_connections > 0
        ):
            raise ValueError(
                f"engine {name!r}: option max_connections={max_connections!r} must be a positive int"
            )
        if headers is not None and not (
            isinstance(headers, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
        ):
            raise ValueError(f"engine {name!r}: option headers must be a dict of str to str")
        self.timeout = float(timeout)
        self.max_connections = max_connections
        self.headers = dict(headers or {})
        self.retry = RetryPolicy.from_options(name, retries, max_retry_wait)
        self.profile = profile_with(self.default_profile, max_batch, max_efficient_batch)
        self._client: Any = None

    async def start(self) -> None:
        """Open the pooled HTTP client. No call is made (the API may be started later) unless option
        `costs` is True: then the cost probe's searches run now, and a failed one fails the start."""
        import httpx

        if self._client is not None:
            return
        limits = httpx.Limits(
            max_connections=self.max_connections, max_keepalive_connections=self.max_connections
        )
        self._client = httpx.AsyncClient(
            timeout=self.timeout, limits=limits, headers=self.headers, follow_redirects=False
        )
        try:
            self.profile.op_costs = await engine_op_costs(
                self.name,
                "search",
                self.costs_option,
                {str(PrimOp.SEARCHING): self._probe_run},
                PROBE_SIZES,
                warm_up=(1,),
            )
        except BaseException as exc:  # the client is closed again whatever stopped the probe
            await self.stop()
            if not isinstance(exc, RemoteSearchError):
                raise
            raise RemoteSearchError(
                f"{exc} (during the cost probe at start: start the API first, or give the engine costs=False "
                f"or a profile)"
            ) from exc

    async def _probe_run(self, n: int, salt: str) -> Any:
        """A batch of the cost probe: `n` unique queries, one call each."""
        return await self.execute(PrimOp.SEARCHING, [{"query": probe_words(i, salt)} for i in range(n)])

    async def stop(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def health(self) -> bool:
        """True once started (a web-search API has no standard health endpoint to ask)."""
        return self._client is not None

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """One batch of "searching" requests {"query", "top_k"} -> [[{text, score, title}], ...]."""
        if op != PrimOp.SEARCHING:
            raise ValueError(
                f"engine {self.name!r} (remote search) does not support op {op!r}; it runs ['searching']"
            )
        if self._client is None:
            raise RuntimeError(f"engine {self.name!r} is not started: await engine.start() first")
        calls = []
        for i, req in enumerate(requests):
            query, top_k = search_request(req, "query", f"engine {self.name!r} searching request {i}")
            calls.append(self._search(query, top_k))
        tasks = [asyncio.ensure_future(c) for c in calls]
        try:
            return list(await asyncio.gather(*tasks))
        finally:
            for t in tasks:
                t.cancel()

    async def stream(
        self, op: str, requests: list[dict[str, Any]]
    ) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        """No streaming output: yields each request's final result."""
        results = await self.execute(op, requests)
        for i, result in enumerate(results):
            yield i, StreamEvent.FINAL, result

    async def _search(self, query: str, top_k: int) -> list[dict[str, Any]]:
        import httpx

        where = f"engine {self.name!r}: GET {self.url}"
        try:
            response = await self.retry.call(
                lambda: self._client.get(self.url, params={"q": query, "top_k": top_k}),
                lambda r: r.status_code,
                lambda r: r.headers.get("retry-after"),
                where,
            )
        except httpx.TimeoutException as exc:
            raise RemoteSearchError(f"{where} timed out after {self.timeout:g} s") from exc
        except httpx.TransportError as exc:
            raise RemoteSearchError(
                f"{where}: cannot reach the search API ({type(exc).__name__}: {exc})"
            ) from exc
        if not response.is_success:
            log.warning("%s: HTTP %d: %r", where, response.status_code, response.text[:200])
            raise RemoteSearchError(f"{where}: HTTP {response.status_code}")
        try:
            body = response.json()
        except ValueError as exc:
            log.warning("%s: the response is not JSON: %r", where, response.text[:200])
            raise RemoteSearchError(f"{where}: the response is not JSON") from exc
        return parse_results(body, where)[:top_k]


def search_engine(name: str, url: str | None = None, **options: Any) -> Any:
    """Kind "search": the remote adapter when `url` is given, else the local full-text search."""
    if url is not None:
        return RemoteSearchEngine(name, url=url, **options)
    from engines.search.text_search import TextSearchEngine

    return TextSearchEngine(name, **options)


def defaults_for(options: dict[str, Any]) -> tuple[frozenset[str], EngineProfile]:
    """Ops and default profile of the adapter these options select (for `Engine` specs)."""
    if options.get("url") is not None:
        return RemoteSearchEngine.ops, RemoteSearchEngine.default_profile
    from engines.search.text_search import TextSearchEngine

    return TextSearchEngine.ops, TextSearchEngine.default_profile


search_engine.ops = RemoteSearchEngine.ops  # type: ignore[attr-defined]
search_engine.defaults_for = defaults_for  # type: ignore[attr-defined]
