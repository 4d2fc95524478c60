"""Prefix warm-ups that would hold their call back.

A Partial Prefilling (pass `prefill_split`) only fills the engine's prefix cache ahead of its call:
the Full Prefilling sends the whole prompt anyway and reads nothing from it. Under load the warm-up
can still sit in the engine queue when everything else its call needs is ready; waiting for it
would then delay the call it was meant to speed up. So the graph scheduler withdraws it from the
queue (or never sends it, if it was not sent yet) and lets the call go: trace status "skipped",
counter `dropped_warmups`. A warm-up already running on the engine is waited for: it is short, and
its blocks are about to be cached."""

from __future__ import annotations

from teola.runtime.graph_tier.dispatch_kind import DispatchKind
from teola.runtime.graph_tier.query_state import DISPATCHED, RELEASED, WAITING, QueryState
from teola.runtime.trace_status import TraceStatus


def drop_waiting_warmups(run: QueryState, c: int) -> None:
    """`c` just lost a parent: if only warm-ups still hold it, drop those not yet running."""
    pending = [w for w in run.plan.warmups[c] if run.state[w] != RELEASED]
    if run.indeg[c] != len(pending) or run.dead:
        return  # something else the call needs is not ready yet
    for w in pending:
        if run.state[w] == DISPATCHED and not _withdrawn(run, w):
            continue
        if run.state[w] in (WAITING, DISPATCHED):
            _drop(run, w)


def _withdrawn(run: QueryState, w: int) -> bool:
    """Take `w`'s queued work back from its engine; False if it has started."""
    tr = run.trace[w]
    works = [x for x in run.works if x.idx == w and x.kind is DispatchKind.PRIM]
    if (
        tr is None
        or tr["started"] is not None
        or len(works) != 1
        or works[0].entry is None
        or works[0].entry.taken
    ):
        return False  # on an engine already (or handed to a preemptor that will start it)
    if not run.ctx.withdraw(run.plan.prims[w].engine, works[0].entry):
        return False
    run.close_work(works[0])
    return True


def _drop(run: QueryState, w: int) -> None:
    p = run.plan.prims[w]
    t = run.loop.time() - run.t0
    tr = run.trace[w]
    if tr is None:
        tr = run.trace[w] = run.new_trace(p, TraceStatus.SKIPPED, t)
    tr.update(
        {"status": TraceStatus.SKIPPED, "started": t, "finished": t, "dropped": "its call was ready first"}
    )
    run.values.update({k: None for k in p.outputs})
    run.ctx.metrics.dropped_warmups += 1
    run.release(w)
