"""Tool engine (op "tool"): registered Python callables and HTTP endpoints an agent can call.

Request {"tool": str, "args": dict} -> the tool's JSON-serializable result.

- Python tools: `register_tool(name, fn, description)`; `fn(**args)` may be sync (run in a worker
  thread) or async. HTTP tools: `register_http_tool(name, url, method, timeout)` or the option
  `http_tools=[{"name", "url", "method", "timeout", "description", "headers"}]`; `{placeholders}` in
  the URL path/query are filled from args (URL-quoted; never in the scheme or host), the remaining
  args go as query parameters (GET, DELETE) or as a JSON body (POST, PUT, PATCH). A JSON response is
  decoded, anything else is returned as text; a non-2xx status is an error.
- Every call has a timeout (per tool, else the engine's `timeout=` option, default 10 s). A sync tool
  that times out keeps running in its thread (Python cannot kill threads); its result is discarded.
- Errors: the requests of a batch run concurrently; if any fails, `execute` raises `ToolBatchError`
  listing every failed request (index, tool, cause) after all have finished, following the engine
  protocol (a failure fails the batch; the runtime attributes it through `.failures`). An unknown
  tool is an error naming the known tools.

Default tools (option `defaults=True`): `calculator` (arithmetic parsed with `ast`, never `eval`),
`convert_units`, `add_days`, `days_between`, `weekday`, `today`; with option `wikipedia=True` (or a
dict of `TextSearchEngine` options) also `wikipedia`, a lookup over the local Wikipedia corpus table.
"""
from __future__ import annotations

import ast
import asyncio
import datetime as dt
import inspect
import json
import math
import operator
import string
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable
from urllib.parse import quote, urlsplit

from engines.protocol import EngineProfile

_HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


class ToolError(RuntimeError):
    """One tool call failed; `.tool` and `.index` (position in the batch) say which."""

    def __init__(self, message: str, tool: str, index: int) -> None:
        super().__init__(message)
        self.tool, self.index = tool, index


class ToolBatchError(RuntimeError):
    """Some requests of a batch failed; `.failures` holds one `ToolError` per failed request."""

    def __init__(self, failures: list[ToolError], batch_size: int) -> None:
        lines = "; ".join(f"request {f.index} ({f.tool}): {f}" for f in failures)
        super().__init__(f"{len(failures)} of {batch_size} tool calls failed: {lines}")
        self.failures = failures


@dataclass(slots=True)
class Tool:
    """A registered tool: a Python callable or an HTTP endpoint."""

    name: str
    description: str = ""
    fn: Callable[..., Any] | None = None
    url: str | None = None
    method: str = "GET"
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None


class ToolEngine:
    """Runs tool calls (op "tool") with per-call timeouts."""

    ops = frozenset({"tool"})

    def __init__(
        self,
        name: str,
        *,
        defaults: bool = True,
        wikipedia: bool | dict[str, Any] = False,
        http_tools: list[dict[str, Any]] | None = None,
        timeout: float = 10.0,
        max_batch: int = 32,
        max_efficient_batch: int = 8,
    ) -> None:
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"option timeout={timeout!r}: must be a positive number of seconds")
        self.name = name
        self.timeout = float(timeout)
        self.profile = EngineProfile(max_batch=max_batch, max_efficient_batch=max_efficient_batch)
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
        self._tools[name] = Tool(name, description, fn=fn, timeout=_check_timeout(name, timeout))

    def register_http_tool(
        self,
        name: str,
        url: str,
        method: str = "GET",
        timeout: float | None = None,
        description: str = "",
        headers: dict[str, str] | None = None,
    ) -> None:
        """Register an HTTP endpoint; `{arg}` placeholders in the URL path/query are filled from args."""
        self._check_name(name)
        method = str(method).upper()
        if method not in _HTTP_METHODS:
            raise ValueError(f"http tool {name!r}: method={method!r}; use one of {', '.join(_HTTP_METHODS)}")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"http tool {name!r}: url={url!r} must be an absolute http:// or https:// URL")
        if "{" in parts.netloc or "{" in parts.scheme:
            raise ValueError(f"http tool {name!r}: url={url!r}: placeholders are allowed in the path and query only")
        for _, field_name, _, _ in string.Formatter().parse(url):
            if field_name is not None and not field_name.isidentifier():
                raise ValueError(f"http tool {name!r}: placeholder {{{field_name}}} must be a plain argument name")
        self._tools[name] = Tool(
            name, description, url=url, method=method, headers=dict(headers or {}),
            timeout=_check_timeout(name, timeout),
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
            self._client = httpx.AsyncClient(follow_redirects=False)
        if self._wikipedia and self._search is None:
            from engines.text_search import TextSearchEngine

            options = self._wikipedia if isinstance(self._wikipedia, dict) else {}
            search = TextSearchEngine(f"{self.name}.wikipedia", **options)
            await search.start()
            self._search = search

            async def wikipedia(query: str, top_k: int = 3) -> list[dict[str, str]]:
                """Look up Wikipedia lead paragraphs (local corpus): args query, top_k (default 3)."""
                [hits] = await search.execute("searching", [{"query": query, "top_k": top_k}])
                return [{"title": h["title"], "text": h["text"]} for h in hits]

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
        if op != "tool":
            raise ValueError(f"engine {self.name!r} (tools) does not support op {op!r}; it runs ['tool']")
        if self._client is None:
            raise RuntimeError(f"engine {self.name!r} is not started: await engine.start() first")
        outcomes = await asyncio.gather(*(self._call(i, r) for i, r in enumerate(requests)), return_exceptions=True)
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if failures:
            for f in failures:
                if not isinstance(f, ToolError):
                    raise f  # cancellation or an internal error: not a tool failure
            raise ToolBatchError(failures, len(requests)) from failures[0]
        return outcomes

    async def stream(self, op: str, requests: list[dict[str, Any]]) -> AsyncIterator[tuple[int, str, Any]]:
        """No streaming output: yields each request's final result."""
        results = await self.execute(op, requests)
        for i, result in enumerate(results):
            yield i, "final", result

    async def call(self, tool: str, **args: Any) -> Any:
        """Call one tool directly (outside a batch)."""
        return (await self.execute("tool", [{"tool": tool, "args": args}]))[0]

    async def _call(self, index: int, req: Any) -> Any:
        name = req.get("tool") if isinstance(req, dict) else None
        if not isinstance(req, dict) or not isinstance(name, str):
            raise ToolError("a tool request must be a dict {'tool': str, 'args': dict}", str(name), index)
        tool = self._tools.get(name)
        if tool is None:
            raise ToolError(f"unknown tool {name!r}; known tools: {', '.join(sorted(self._tools))}", name, index)
        args = req.get("args") or {}
        if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
            raise ToolError(f"'args' must be a dict with str keys, got {type(args).__name__}", name, index)
        timeout = tool.timeout or self.timeout
        try:
            result = await asyncio.wait_for(self._invoke(tool, args), timeout)
        except asyncio.TimeoutError as exc:
            raise ToolError(f"timed out after {timeout:g} s", name, index) from exc
        except asyncio.CancelledError:
            raise
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
        return await self._http(tool, args)

    async def _http(self, tool: Tool, args: dict[str, Any]) -> Any:
        assert tool.url is not None
        fields = {f for _, f, _, _ in string.Formatter().parse(tool.url) if f}
        missing = sorted(fields - set(args))
        if missing:
            raise ValueError(f"missing argument(s) for the URL: {', '.join(missing)}")
        url = tool.url.format(**{k: quote(str(args[k]), safe="") for k in fields})
        rest = {k: v for k, v in args.items() if k not in fields}
        kwargs: dict[str, Any] = {"headers": tool.headers}
        if tool.method in ("GET", "DELETE"):
            kwargs["params"] = {k: v if isinstance(v, str) else json.dumps(v) for k, v in rest.items()}
        else:
            kwargs["json"] = rest
        response = await self._client.request(tool.method, url, **kwargs)
        if not response.is_success:
            raise RuntimeError(f"HTTP {response.status_code} from {tool.method} {url}: {response.text[:200]}")
        if response.headers.get("content-type", "").split(";")[0].strip().endswith("json"):
            return response.json()
        return response.text


def _check_timeout(name: str, timeout: Any) -> float | None:
    if timeout is None:
        return None
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"tool {name!r}: timeout={timeout!r} must be a positive number of seconds")
    return float(timeout)


# ---- default tools ---------------------------------------------------------------------------------

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt, "log": math.log, "log10": math.log10, "log2": math.log2, "exp": math.exp,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos,
    "atan": math.atan, "abs": abs, "round": round, "floor": math.floor, "ceil": math.ceil,
    "min": min, "max": max,
}
_CONSTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
_MAX_BITS = 10_000


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTS:
        return _CONSTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(left) > 1 and abs(right) * math.log2(abs(left)) > _MAX_BITS:
            raise ValueError("result too large")
        if isinstance(node.op, ast.Mult) and isinstance(left, int) and isinstance(right, int) \
                and left.bit_length() + right.bit_length() > _MAX_BITS:
            raise ValueError("result too large")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        return _FUNCS[node.func.id](*(_eval(a) for a in node.args))
    raise ValueError(f"unsupported syntax {ast.unparse(node)!r}: use numbers, + - * / // % **, parentheses, "
                     f"{', '.join(sorted(_CONSTS))} and {', '.join(sorted(_FUNCS))}()")


def calculator(expression: str) -> float | int:
    """Evaluate arithmetic safely (no eval): args expression, e.g. "2 * (3 + 4) ** 2 / sqrt(16)"."""
    if not isinstance(expression, str) or not expression.strip():
        raise ValueError("expression must be a non-empty string")
    if len(expression) > 1000:
        raise ValueError("expression longer than 1000 characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError) as exc:
        raise ValueError(f"cannot parse expression {expression!r}") from exc
    try:
        result = _eval(tree)
    except ZeroDivisionError as exc:
        raise ValueError("division by zero") from exc
    except OverflowError as exc:
        raise ValueError("result too large") from exc
    except RecursionError as exc:
        raise ValueError("expression nested too deeply") from exc
    if isinstance(result, complex) or (isinstance(result, float) and not math.isfinite(result)):
        raise ValueError(f"result {result!r} is not a finite real number")
    if isinstance(result, float) and result.is_integer() and abs(result) < 2**53:
        return int(result)
    return result


_UNITS: dict[str, tuple[str, float]] = {
    # length (m)
    "mm": ("length", 1e-3), "cm": ("length", 1e-2), "m": ("length", 1.0), "km": ("length", 1e3),
    "in": ("length", 0.0254), "ft": ("length", 0.3048), "yd": ("length", 0.9144), "mi": ("length", 1609.344),
    # mass (kg)
    "mg": ("mass", 1e-6), "g": ("mass", 1e-3), "kg": ("mass", 1.0), "t": ("mass", 1e3),
    "oz": ("mass", 0.028349523125), "lb": ("mass", 0.45359237),
    # time (s)
    "ms": ("time", 1e-3), "s": ("time", 1.0), "min": ("time", 60.0), "h": ("time", 3600.0),
    "day": ("time", 86400.0), "week": ("time", 604800.0), "year": ("time", 31557600.0),
    # volume (l)
    "ml": ("volume", 1e-3), "l": ("volume", 1.0), "gal": ("volume", 3.785411784), "m3": ("volume", 1e3),
    # speed (m/s)
    "m/s": ("speed", 1.0), "km/h": ("speed", 1 / 3.6), "mph": ("speed", 0.44704), "knot": ("speed", 1852 / 3600),
    # data (byte)
    "b": ("data", 1.0), "kb": ("data", 1e3), "mb": ("data", 1e6), "gb": ("data", 1e9), "tb": ("data", 1e12),
    "kib": ("data", 1024.0), "mib": ("data", 1024.0**2), "gib": ("data", 1024.0**3),
}
_TEMPS = {"c", "f", "k"}


def convert_units(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a quantity: args value, from_unit, to_unit (length, mass, time, volume, speed, data, c/f/k)."""
    v = float(value)
    a, b = str(from_unit).strip().lower(), str(to_unit).strip().lower()
    if a in _TEMPS and b in _TEMPS:
        kelvin = {"c": v + 273.15, "f": (v - 32) * 5 / 9 + 273.15, "k": v}[a]
        return {"c": kelvin - 273.15, "f": (kelvin - 273.15) * 9 / 5 + 32, "k": kelvin}[b]
    if a not in _UNITS or b not in _UNITS:
        unknown = a if a not in _UNITS and a not in _TEMPS else b
        raise ValueError(f"unknown unit {unknown!r}; known: {', '.join(sorted(_UNITS) + sorted(_TEMPS))}")
    if _UNITS[a][0] != _UNITS[b][0]:
        raise ValueError(f"cannot convert {_UNITS[a][0]} ({a}) to {_UNITS[b][0]} ({b})")
    return v * _UNITS[a][1] / _UNITS[b][1]


def _date(value: str, arg: str) -> dt.date:
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError as exc:
        raise ValueError(f"{arg}={value!r}: use an ISO date YYYY-MM-DD") from exc


def add_days(date: str, days: int) -> str:
    """Add (or subtract) days to a date: args date (YYYY-MM-DD), days -> YYYY-MM-DD."""
    return (_date(date, "date") + dt.timedelta(days=int(days))).isoformat()


def days_between(start: str, end: str) -> int:
    """Days from start to end (negative if end is earlier): args start, end (YYYY-MM-DD)."""
    return (_date(end, "end") - _date(start, "start")).days


def weekday(date: str) -> str:
    """Day of the week of a date: args date (YYYY-MM-DD) -> e.g. "Monday"."""
    return _date(date, "date").strftime("%A")


def today() -> str:
    """Today's date (local time) as YYYY-MM-DD; no args."""
    return dt.date.today().isoformat()
