"""`QueryState`: what the graph tier's helpers (the entries' works, speculation, warm-ups, the query
context's callbacks) read and call of a query in flight. `QueryRun` implements it; the helpers are
typed against this protocol, never against `QueryRun`, so none of them imports the graph scheduler.

The data: the query's `plan` (teola.runtime.graph_tier.dispatch_plan), per-primitive `state`,
`indeg` and `trace`, its object store (`values`, with `skipped` keys), the `works` in flight,
speculation's `held` text and `deferred` failures, and whether the query is `dead`.
The calls: release a primitive, start / close a trace or a work, fail the query, emit events, and
the entry callbacks run under `guard` (an exception there fails the query, not the loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from teola.ir.primitive import Primitive
from teola.runtime.errors import QueryError
from teola.runtime.graph_tier.dispatch_plan import DispatchPlan
from teola.runtime.graph_tier.query_context import QueryContext
from teola.runtime.trace_row import TraceRow
from teola.runtime.trace_status import TraceStatus

# A primitive's states. WAITING: parents not done; DISPATCHED: queued on or running in an engine;
# DONE: finished (its children may still wait for it); RELEASED: its children were told, exactly once
WAITING, DISPATCHED, DONE, RELEASED = 0, 1, 2, 3


class QueryState(Protocol):
    ctx: QueryContext
    qid: str
    plan: DispatchPlan
    loop: asyncio.AbstractEventLoop
    t0: float
    values: dict[str, Any]
    skipped: set[str]
    indeg: list[int]
    state: bytearray
    trace: list[TraceRow | None]
    works: set[Any]
    held: dict[int, list[str]]
    deferred: dict[int, tuple[QueryError, BaseException]]
    inflight: int
    dead: bool
    on_event: Callable[[dict[str, Any]], None] | None

    def release(self, i: int) -> None: ...

    def new_trace(self, p: Primitive, status: TraceStatus, t: float, n: int = 0) -> TraceRow: ...

    def close_work(self, work: Any) -> None: ...

    def fail(self, err: QueryError, cause: BaseException | None = None) -> None: ...

    def emit(self, event: dict[str, Any]) -> None: ...

    def emit_primitive(self, tr: TraceRow) -> None: ...

    def guard(self, fn: Any, *args: Any) -> None: ...

    def work_done(self, work: Any, t: float) -> None: ...

    def stream_item(self, work: Any, text: str, t: float) -> None: ...

    def stream_final(self, work: Any, result: Any, t: float) -> None: ...

    def maybe_cleanup(self) -> None: ...
