"""Tool engine (op "tool"): registered Python callables and HTTP endpoints an agent can call.

Request {"tool": str, "args": dict} -> the tool's JSON-serializable result. With "on_error": "result"
a failed call returns "error: <why>" instead of failing the batch (an agent's model reads it).

- Python tools: `register_tool(name, fn, description)`; `fn(**args)` may be sync (run in a worker
  thread) or async. HTTP tools: `register_http_tool(name, url, method, timeout)` or the option
  `http_tools=[{"name", "url", "method", "timeout", "description", "headers", "idempotent"}]`;
  `{placeholders}` in the URL path/query are filled from args (engines.tools.http_url: a path argument is one
  encoded segment and never "", "." or ".."; never in the scheme or host), the remaining args go as query
  parameters (GET, DELETE) or as a JSON body (POST, PUT, PATCH), and an arg named like a query
  parameter written in the URL is refused (those are fixed). A JSON response is decoded, anything
  else is returned as text; a non-2xx status is an error; a response body over `max_response_bytes`
  (engine option, default 1 MiB) is an error. An idempotent call (GET, HEAD, PUT, DELETE or
  OPTIONS, or any method registered with `idempotent=True`) whose pooled keep-alive connection the
  server closed unanswered is sent once more, and one answered 429 or 5xx is retried
  (engines.http_retry: up to the engine's `retries` times, default 2, honouring `Retry-After`,
  no wait ending over `max_retry_wait` s, default 5, after the first attempt; all within the call's
  timeout). A call that is not idempotent is never sent twice.
- Every call has a timeout (per tool, else the engine's `timeout=` option, default 10 s). A sync tool
  that times out keeps running in its thread (Python cannot kill threads); its result is discarded.
- Errors: the requests of a batch run concurrently; if any fails, `execute` raises `ToolBatchError`
  listing every failed request (index, tool, cause) after all have finished, following the engine
  protocol (a failure fails the batch; the runtime attributes it through `.failures`). An unknown
  tool is an error naming the known tools. Error messages reach the tenant (and an agent's model),
  so an HTTP tool's error names the tool and its status or failure kind only, never its URL (whose
  query may hold a key) or response body: those are logged here (logger "teola.engines").

Default tools (option `defaults=True`): `calculator` (arithmetic parsed with `ast`, never `eval`),
`convert_units`, `add_days`, `days_between`, `weekday`, `today`; with option `wikipedia=True` (or a
dict of `TextSearchEngine` options) also `wikipedia`, a lookup over the local Wikipedia corpus table
(engines.tools.wikipedia).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import string
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

from engines.http_retry import DEFAULT_MAX_RETRY_WAIT, DEFAULT_RETRIES, RetryPolicy
from engines.protocol import EngineProfile, StreamEvent, profile_with
from engines.requests import PrimOp
from engines.tools.builtin import add_days, calculator, convert_units, days_between, today, weekday
from engines.tools.http_call import HTTP_METHODS, IDEMPOTENT, call_http
from engines.tools.tool import Tool, ToolBatchError, ToolError, ToolHTTPError, check_timeout
from engines.tools.wikipedia import wikipedia_tool

MAX_RESPONSE_BYTES = 1 << 20


class ToolEngine:
    """Runs tool calls (op "tool") with per-call timeouts.

    Options: defaults (register the built-in tools), wikipedia (True or TextSearchEngine options:
    add the `wikipedia` lookup), http_tools (list of HTTP tool specs), timeout (seconds per call,
    default 10), max_response_bytes (largest HTTP tool response body read, default 1 MiB),
    retries (times an idempotent HTTP call answered 429/5xx is sent again, default 2; 0: never),
    max_retry_wait (seconds after the first attempt by which a retry's wait must end, default 5),
    max_batch (32), max_efficient_batch (8)."""

    ops = frozenset({PrimOp.TOOL})
    # tools wait on services or threads, not on a shared device: batches overlap
    default_profile = EngineProfile(max_batch=32, max_efficient_batch=8, max_inflight=64)

    def __init__(
        self,
        name: str,
        *,
        defaults: bool = True,
        wikipedia: bool | dict[str, Any] = False,
        http_tools: list[dict[str, Any]] | None = None,
        timeout: float = 10.0,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        retries: int = DEFAULT_RETRIES,
        max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
        max_batch: int | None = None,
        max_efficient_batch: int | None = None,
    ) -> None:
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"option timeout={timeout!r}: must be a positive number of seconds")
        if (
            isinstance(max_response_bytes, bool)
            or not isinstance(max_response_bytes, int)
            or max_response_bytes < 1
        ):
            raise ValueError(f"option max_response_bytes={max_response_bytes!r}: must be a positive int")
        self.name = name
        self.max_response_bytes = max_response_bytes
        self.retry = RetryPolicy.from_options(name, retries, max_retry_wait)
        self.timeout = float(timeout)
        self.profile = profile_with(self.default_profile, max_batch, max_efficient_batch)
        self._tools: dict[str, Tool] = {}
        self._client: Any = None
        self._search: Any = None
        self._wikipedia = wikipedia
        if defaults:
            for fn in (calculator, convert_units, add_days, days_between, weekday, today):
                self.register_tool(fn.__name__, fn, (fn.__doc__ or "").strip().splitlines()[0])
        for i, spec in enumerate(http_tools or []):
            if not isinstance(spec, dict) or "name" not in spec or "url" not in spec:
                raise ValueError(f"option http_tools[{i}]: need a dict with at least 'name' and 'url'")
            self.register_http_tool(**spec)

    # ---- registration ----------------------------------------------------------------------------

    def register_tool(
        self, name: str, fn: Callable[..., Any], description: str = "", timeout: float | None = None
    ) -> None:
        """Register a sync or async callable, called as `fn(**args)`."""
        self._check_name(name)
        if not callable(fn):
            raise TypeError(f"tool {name!r}: fn must be callable, got {type(fn).__name__}")
        self._tools[name] = Tool(name, description, fn=fn, timeout=check_timeout(name, timeout))

    def register_http_tool(
        self,
        name: str,
        url: str,
        method: str = "GET",
        timeout: float | None = None,
        description: str = "",
        headers: dict[str, str] | None = None,
        idempotent: bool | None = None,
    ) -> None:
        """Register an HTTP endpoint; `{arg}` placeholders in the URL path/query are filled from args.
        idempotent: whether sending a call twice does what sending it once does (then a dropped
        connection or a 429/5xx answer is retried); default True for GET, HEAD, PUT, DELETE and
        OPTIONS, False otherwise (say True for a POST that only reads)."""
        self._check_name(name)
        method = str(method).upper()
        if method not in HTTP_METHODS:
            raise ValueError(f"http tool {name!r}: method={method!r}; use one of {', '.join(HTTP_METHODS)}")
        if idempotent is not None and not isinstance(idempotent, bool):
            raise ValueError(f"http tool {name!r}: idempotent={idempotent!r} must be true, false or left out")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"http tool {name!r}: url={url!r} must be an absolute http:// or https:// URL")
        if "{" in parts.netloc or "{" in parts.scheme:
            raise ValueError(
                f"http tool {name!r}: url={url!r}: placeholders are allowed in the path and query only"
            )
        for _, field_name, _, _ in string.Formatter().parse(url):
            if field_name is not None and not field_name.isidentifier():
                raise ValueError(
                    f"http tool {name!r}: placeholder {{{field_name}}} must be a plain argument name"
                )
        self._tools[name] = Tool(
            name,
            description,
            url=url,
            method=method,
            headers=dict(headers or {}),
            timeout=check_timeout(name, timeout),
            idempotent=method in IDEMPOTENT if idempotent is None else idempotent,
        )

    def _check_name(self, name: Any) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"tool name {name!r}: use a Python-identifier-like name (letters, digits, '_')")

    def tools(self) -> list[dict[str, str]]:
        """[{"name", "description"}] of every registered tool, sorted by name (for agent prompts)."""
        return [{"name": t.name, "description": t.description} for _, t in sorted(self._tools.items())]

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the HTTP client; with `wikipedia=` start the text search engine and add `wikipedia`."""
        import httpx

        if self._client is None:
            # no client-side limit: each call's own timeout (asyncio.wait_for in _call) bounds it
            self._client = httpx.AsyncClient(follow_redirects=False, timeout=None)
        if self._wikipedia and self._search is None:
            from engines.search.text_search import TextSearchEngine

            options = self._wikipedia if isinstance(self._wikipedia, dict) else {}
            search = TextSearchEngine(f"{self.name}.wikipedia", **options)
            await search.start()
            self._search = search
            wikipedia = wikipedia_tool(search)
            self.register_tool("wikipedia", wikipedia, (wikipedia.__doc__ or "").strip())

    async def stop(self) -> None:
        """Close the HTTP client and the wikipedia search engine."""
        try:
            if self._search is not None:
                await self._search.stop()
        finally:
            self._search = None
            if self._client is not None:
                await self._client.aclose()
                self._client = None

    async def health(self) -> bool:
        """True once started (and the wikipedia engine, if any, is healthy)."""
        if self._client is None:
            return False
        return await self._search.health() if self._search is not None else True

    # ---- protocol --------------------------------------------------------------------------------

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """Run a batch of tool calls concurrently; raises ToolBatchError if any failed."""
        if op != PrimOp.TOOL:
            raise ValueError(f"engine {self.name!r} (tools) does not support op {op!r}; it runs ['tool']")
        if self._client is None:
            raise RuntimeError(f"engine {self.name!r} is not started: await engine.start() first")
        outcomes = await asyncio.gather(
            *(self._call(i, r) for i, r in enumerate(requests)), return_exceptions=True
        )
        outcomes = [
            f"error: {o.args[0]}"
            if isinstance(o, ToolError) and isinstance(r, dict) and r.get("on_error") == "result"
            else o
            for o, r in zip(outcomes, requests)
        ]
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if failures:
            for f in failures:
                if not isinstance(f, ToolError):
                    raise f  # cancellation or an internal error: not a tool failure
            raise ToolBatchError(failures, len(requests)) from failures[0]
        return outcomes

    async def stream(
        self, op: str, requests: list[dict[str, Any]]
    ) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        """No streaming output: yields each request's final result."""
        results = await self.execute(op, requests)
        for i, result in enumerate(results):
            yield i, StreamEvent.FINAL, result

    async def call(self, tool: str, **args: Any) -> Any:
        """Call one tool directly (outside a batch)."""
        return (await self.execute("tool", [{"tool": tool, "args": args}]))[0]

    async def _call(self, index: int, req: Any) -> Any:
        name = req.get("tool") if isinstance(req, dict) else None
        if not isinstance(req, dict) or not isinstance(name, str):
            raise ToolError("a tool request must be a dict {'tool': str, 'args': dict}", str(name), index)
        tool = self._tools.get(name)
        if tool is None:
            raise ToolError(
                f"unknown tool {name!r}; known tools: {', '.join(sorted(self._tools))}", name, index
            )
        args = req.get("args") or {}
        if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
            raise ToolError(f"'args' must be a dict with str keys, got {type(args).__name__}", name, index)
        timeout = tool.timeout or self.timeout
        try:
            result = await asyncio.wait_for(self._invoke(tool, args), timeout)
        except TimeoutError as exc:
            raise ToolError(f"timed out after {timeout:g} s", name, index) from exc
        except asyncio.CancelledError:
            raise
        except ToolHTTPError as exc:
            raise ToolError(str(exc), name, index) from exc
        except Exception as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}", name, index) from exc
        try:
            json.dumps(result)
        except (TypeError, ValueError) as exc:
            raise ToolError(f"result is not JSON-serializable ({exc})", name, index) from exc
        return result

    async def _invoke(self, tool: Tool, args: dict[str, Any]) -> Any:
        if tool.fn is not None:
            if inspect.iscoroutinefunction(tool.fn):
                return await tool.fn(**args)
            result = await asyncio.to_thread(tool.fn, **args)
            return await result if inspect.isawaitable(result) else result
        return await call_http(self._client, self.retry, self.max_response_bytes, tool, args)


# ---- default tools ---------------------------------------------------------------------------------
