"""Upper tier: the graph scheduler state of one query (Teola §5.1). It tracks in-degrees, keeps the
per-query object store, runs control primitives itself, dispatches every other primitive node
(with its query id, depth, arrival time and requests) to its engine's scheduler, and collects the
per-primitive trace. Everything here runs on the event loop through callbacks: no task per primitive."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from teola.compile.compiler import Compiled
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.runtime.errors import QueryCancelled, QueryError, QueryTimeout
from teola.runtime.graph_tier import completions
from teola.runtime.graph_tier.dispatch_kind import DispatchKind
from teola.runtime.graph_tier.dispatch_plan import DispatchPlan
from teola.runtime.graph_tier.query_context import QueryContext
from teola.runtime.graph_tier.query_state import DISPATCHED, DONE, RELEASED
from teola.runtime.graph_tier.query_work import DispatchWork
from teola.runtime.graph_tier.speculation import abort_keys, settle
from teola.runtime.graph_tier.warmups import drop_waiting_warmups
from teola.runtime.pausing_segments import pause_hint
from teola.runtime.requests import AtOnce, at_once, build_requests, frozen_bodies
from teola.runtime.result import Result
from teola.runtime.staging import Staging
from teola.runtime.trace_row import TraceRow, new_row
from teola.runtime.trace_status import TraceStatus
from teola.scheduling.base import Pending
from teola.scheduling.dispatch_record import DispatchRecord

log = logging.getLogger("teola.runtime")


class QueryRun:
    """One query in flight."""

    def __init__(
        self,
        ctx: QueryContext,
        compiled: Compiled,
        config: dict[str, Any],
        plan: DispatchPlan,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.ctx = ctx
        self.on_event = on_event
        self.qid = compiled.query_id
        self.plan = plan
        self.values: dict[str, Any] = {**compiled.inputs, "sys.query": self.qid}  # sys.query: segment_fields
        self.skipped: set[str] = set()
        n = len(plan.prims)
        self.indeg = list(plan.indeg)
        self.state = bytearray(n)
        self.trace: list[TraceRow | None] = [None] * n
        self.remaining = n
        self.priority = config.get("priority", 0)
        self.fuse = bool(config.get("prescheduling", ctx.prescheduling))
        self.prim_timeout = config.get("primitive_timeout")
        self.needs_cleanup = config.get("namespace") is None and bool(plan.ingest_engines)
        self.staging: Staging | None = None  # kept documents go through it (teola.runtime.namespaces.stage)
        self.return_values: tuple[str, ...] = tuple(config.get("return_values") or ())
        self.cache_salt: str | None = config.get("cache_salt")
        self.tenant: str = config.get("tenant") or ""
        rv = set(self.return_values)  # values the caller reads must come back to the driver
        self.remote = (
            frozenset(i for i, keys in plan.remote.items() if not keys & rv) if ctx.remote_data else ()
        )
        self.ok = False
        self.works: set[DispatchWork] = set()
        self.deferred: dict[
            int, tuple[QueryError, BaseException]
        ] = {}  # teola.runtime.graph_tier.speculation
        self.held: dict[int, list[str]] = {}  # streamed text of undecided speculative calls (same)
        self.inflight = 0
        self.dead = False
        self.cleaned = False
        self.group_ready: dict[tuple[int, ...], int] = {}
        self._stack: deque[int] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future = self.loop.create_future()
        self.t0 = self.loop.time()

    # ---- driving ---------------------------------------------------------------------------------
    def start(self, timeout: float | None) -> None:
        if timeout is not None:
            self._timer = self.loop.call_later(timeout, self._query_timeout, timeout)
        if not self.plan.prims:
            self._finish()
            return
        self._stack.extend(self.plan.roots)
        self._drain()

    def guard(self, fn: Any, *args: Any) -> None:
        """Run a state transition; an exception in it fails this query (never the runtime)."""
        try:
            fn(*args)
            self._drain()
        except Exception as exc:  # turned into this query's failure, with the cause chained
            self.fail(
                QueryError(
                    f"query {self.qid}: internal error in the graph scheduler: {type(exc).__name__}: {exc}",
                    self.qid,
                ),
                exc,
            )

    def _drain(self) -> None:
        stack = self._stack
        while stack and not self.dead:
            i = stack.popleft()
            try:
                self._ready(i)
            except Exception as exc:
                p = self.plan.prims[i]
                self.fail(
                    QueryError(
                        f"primitive {p.name!r} ({p.op.value}) on engine {p.engine!r} could not "
                        f"run: {type(exc).__name__}: {exc}",
                        self.qid,
                        p.name,
                        p.engine,
                    ),
                    exc,
                )

    def release(self, i: int) -> None:
        if self.state[i] == RELEASED:
            return  # a stream member finished and was also queued by its parent's release
        self.state[i] = RELEASED
        self.remaining -= 1
        if self.plan.speculative and self.plan.control[i]:
            self._settle(self.plan.prims[i])
        indeg = self.indeg
        for c in self.plan.children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                self._stack.append(c)
            elif c in self.plan.warmups:
                drop_waiting_warmups(self, c)
        if self.remaining == 0:
            self._finish()

    def _now(self) -> float:
        return self.loop.time() - self.t0

    def new_trace(self, p: Primitive, status: TraceStatus, t: float, n: int = 0) -> TraceRow:
        return new_row(p, status, t, n)

    def _ready(self, i: int) -> None:
        st = self.state[i]
        if st == RELEASED:
            return
        if st == DONE:
            self.release(i)
            return
        if st == DISPATCHED:
            return  # a member of a fused/stream dispatch; its work releases it
        plan = self.plan
        p = plan.prims[i]
        now = at_once(p, self.values, self.skipped, plan.control[i])
        if now is not None:  # skipped, or a control op
            self._done_at_once(i, p, now)
            return
        kids = plan.fuse.get(i) if self.fuse else None
        group = plan.groups.get(i)
        if group is not None and not self._group_ready(i, group):
            return
        reqs = build_requests(p, self.values, plan.prims[kids[0]] if kids else None)
        if not reqs:  # a map over no items
            self._done_at_once(i, p, AtOnce({p.outputs[0]: []}))
            return
        head, members, prefill, depth = i, (), None, p.depth
        if kids:  # a prefill fused with its decode (or with the stream group that follows it)
            head, members, prefill, p = kids[0], kids, i, plan.prims[kids[0]]
            kind = DispatchKind.STREAM if p.op is PrimOp.PARTIAL_DECODING else DispatchKind.FUSED
            self.ctx.metrics.fused += 1
        elif group is not None:  # Partial Decoding items served by one streaming request
            kind, head, members = (
                DispatchKind.STREAM,
                group[0],
                tuple(m for m in group if self.state[m] < DONE),
            )
            depth = max(plan.prims[m].depth for m in members)
        else:
            kind = DispatchKind.PRIM
        llm = p.engine in self.ctx.llm_engines
        bodies = frozen_bodies(
            reqs,
            stream_text=self.on_event is not None
            and kind is not DispatchKind.STREAM
            and head in self.plan.answer,
            keep=kind is DispatchKind.PRIM and head in self.remote,
            cache_salt=self.cache_salt if llm else None,
        )
        self._dispatch(
            DispatchWork(run=self, kind=kind, idx=head, requests=bodies, members=members, prefill=prefill),
            p,
            depth,
        )

    def _group_ready(self, i: int, group: tuple[int, ...]) -> bool:
        """A member of a stream group is ready; True once every live member is (the group then runs)."""
        n = self.group_ready.get(group, 0) + 1
        self.group_ready[group] = n
        self.state[i] = DISPATCHED
        return n >= len([m for m in group if self.state[m] < DONE])

    def _done_at_once(self, i: int, p: Primitive, now: AtOnce) -> None:
        """A primitive that needs no engine: its outputs go in (or are marked skipped) and it is released."""
        t = self._now()
        if now.skipped:
            self.skipped.update(p.outputs)
            self.ctx.metrics.skipped += 1
        else:
            self.values.update(now.outputs)
        tr = self.trace[i] = self.new_trace(p, TraceStatus.SKIPPED if now.skipped else TraceStatus.OK, t)
        tr["started"] = tr["finished"] = t
        if not now.skipped:
            completions.count_primitive(self, p, tr)
        self.release(i)

    def _settle(self, p: Primitive) -> None:
        for key in p.outputs if self.plan.speculative else ():
            if key in self.plan.speculative and not self.dead:
                settle(self, key)

    def _dispatch(self, work: DispatchWork, p: Primitive, depth: int) -> None:
        reqs = work.requests
        now = self.loop.time()
        # the graph tier's hints: the query's engine priority (LLM engines), a pausing segment's handling
        pause, prio = pause_hint(p.args), self.priority if p.engine in self.ctx.llm_engines else None
        entry = Pending(
            query_id=self.qid,
            name=p.name,
            op=p.op.value,
            depth=depth,
            arrival=now,
            requests=reqs,
            query_arrival=self.t0,
            work=work,
            tenant=self.tenant,
            records=[
                DispatchRecord(abort_key=k, pause_kv=pause, priority=prio)
                for k in abort_keys(self, p, len(reqs))
            ],
        )
        work.entry = entry
        rel = now - self.t0
        for i in work.traced():
            q = self.plan.prims[i]
            self.state[i] = DISPATCHED
            self.trace[i] = self.new_trace(q, TraceStatus.QUEUED, rel, len(reqs))
        self.works.add(work)
        if self.prim_timeout is not None:
            work.timer = self.loop.call_later(self.prim_timeout, self._prim_timeout, work)
        self.ctx.submit(p.engine, entry)

    # ---- completions -------------------------------------------------------------------------------
    def close_work(self, work: DispatchWork) -> None:
        self.works.discard(work)
        if work.timer is not None:
            work.timer.cancel()
            work.timer = None

    def work_done(self, work: DispatchWork, t: float) -> None:
        completions.work_done(self, work, t)

    def stream_item(self, work: DispatchWork, text: str, t: float) -> None:
        completions.stream_item(self, work, text, t)

    def stream_final(self, work: DispatchWork, result: Any, t: float) -> None:
        completions.stream_final(self, work, result, t)

    # ---- events -------------------------------------------------------------------------------------
    def emit(self, event: dict[str, Any]) -> None:
        """Hand one event to the query's listener; a failing listener never fails the query."""
        try:
            if self.on_event is not None:
                self.on_event(event)
        except Exception as exc:
            log.warning(
                "query %s: the event listener failed on a %s event: %s: %s",
                self.qid,
                event.get("event"),
                type(exc).__name__,
                exc,
            )

    def emit_primitive(self, tr: TraceRow) -> None:
        """A primitive started (batched on an instance) or finished."""
        if self.on_event is not None:
            done = tr["finished"] is not None
            self.emit(
                {
                    "event": "primitive",
                    "status": "finished" if done else "started",
                    "primitive": tr["primitive"],
                    "op": tr["op"],
                    "engine": tr["engine"],
                    "instance": tr["instance"],
                    "batch_size": tr["batch_size"],
                    "t": tr["finished"] if done else tr["started"],
                }
            )

    # ---- endings -----------------------------------------------------------------------------------
    def trace_list(self) -> list[TraceRow]:
        return [t for t in self.trace if t is not None]

    def _finish(self) -> None:
        if self.dead:
            return
        self.dead = True
        self.ok = True
        if self._timer is not None:
            self._timer.cancel()
        for w in list(self.works):
            self.close_work(w)
        outs = self.plan.outputs
        skipped = bool(outs) and all(k in self.skipped for k in outs)
        output = self.values.get(outs[0]) if len(outs) == 1 else {k: self.values.get(k) for k in outs}
        latency = self.loop.time() - self.t0
        self.ctx.ended(self, None, latency)
        if not self.future.done():
            kept = {k: self.values[k] for k in self.return_values if k in self.values}
            self.future.set_result(Result(output, self.trace_list(), self.qid, latency, skipped, kept))

    def fail(self, err: QueryError, cause: BaseException | None = None) -> None:
        """End the query with `err`: queued primitives are dropped from the engine queues; batches
        already running finish on their engines and their results are ignored."""
        if self.dead:
            return
        self.dead = True
        if cause is not None:
            err.__cause__ = cause
        if self._timer is not None:
            self._timer.cancel()
        for w in list(self.works):
            self.close_work(w)
            if w.entry is not None:
                self.ctx.withdraw(self.plan.prims[w.idx].engine, w.entry)
        for tr in self.trace:
            if tr is not None and tr["status"] == TraceStatus.QUEUED:
                tr["status"] = TraceStatus.DROPPED if tr["started"] is None else TraceStatus.ABANDONED
        err.trace = self.trace_list()
        self.ctx.ended(self, err, self.loop.time() - self.t0)
        if not self.future.done():
            self.future.set_exception(err)
        self.maybe_cleanup()

    def abort(self) -> None:
        """The awaiting task was cancelled: drop the query's queued work."""
        self.fail(QueryCancelled(f"query {self.qid} was cancelled (its task was cancelled)", self.qid))

    def maybe_cleanup(self) -> None:
        """After a failure, once no batch of this query is still on an engine, drop its namespace."""
        if self.ok or self.cleaned or self.inflight or not self.dead:
            return
        self.cleaned = True
        if self.needs_cleanup:
            self.ctx.cleanup(self)

    def _query_timeout(self, seconds: float) -> None:
        self.fail(QueryTimeout(f"query {self.qid} timed out after {seconds} s (config 'timeout')", self.qid))

    def _prim_timeout(self, work: DispatchWork) -> None:
        p = self.plan.prims[work.idx if work.prefill is None else work.prefill]
        self.fail(
            QueryTimeout(
                f"primitive {p.name!r} ({p.op.value}) on engine {p.engine!r} exceeded "
                f"{self.prim_timeout} s (config 'primitive_timeout')",
                self.qid,
                p.name,
                p.engine,
            )
        )
