"""Searches started before the condition that guards their readers is decided (the
`speculative_search` pass marks them with `args["speculate_on"]` = the branch key).

When the condition is decided: "no" (or the condition itself skipped) discards every speculative
primitive still running or queued (its queued work leaves the engine queue, a batch already on an
engine lands unread, the query does not wait for it); "yes" fails the query if one of them failed
meanwhile. A speculative primitive that fails before the decision is held until it (`defer`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from teola.runtime.errors import QueryError

if TYPE_CHECKING:
    from teola.runtime.graph_scheduler import QueryRun

RELEASED = 3  # teola.runtime.graph_scheduler's state of a primitive whose children were told


def undecided(run: "QueryRun", idx: int) -> bool:
    """Whether `idx` is speculative and its condition has not been decided yet."""
    key = run.plan.prims[idx].args.get("speculate_on")
    return key is not None and key not in run.values and key not in run.skipped


def defer(run: "QueryRun", idx: int, err: QueryError, cause: BaseException) -> None:
    """A speculative primitive failed before its condition was decided: hold the error."""
    run.deferred[idx] = (err, cause)


def discarded(run: "QueryRun", idx: int) -> bool:
    """Whether `idx` was a speculative primitive its condition discarded (its results are dropped)."""
    return run.state[idx] == RELEASED and "speculate_on" in run.plan.prims[idx].args


def settle(run: "QueryRun", key: str) -> None:
    """The condition writing `key` was decided (or skipped): act on its speculative primitives."""
    yes = key not in run.skipped and run.values.get(key) is True
    for i in run.plan.speculative.get(key, ()):
        if yes:
            if i in run.deferred:
                err, cause = run.deferred.pop(i)
                run.fail(err, cause)
                return
            continue
        run.deferred.pop(i, None)
        if run.state[i] != RELEASED:
            _discard(run, i)


def _discard(run: "QueryRun", i: int) -> None:
    p = run.plan.prims[i]
    for w in [w for w in run.works if w.idx == i]:
        run._close_work(w)
        if w.entry is not None:
            run.ctx.withdraw(p.engine, w.entry)
    t = run.loop.time() - run.t0
    tr = run.trace[i]
    if tr is None:
        tr = run.trace[i] = run._new_trace(p, "discarded", t)
        tr["started"] = t
    tr.update(status="discarded", finished=t)
    run.ctx.metrics.discarded += 1
    run.skipped.update(p.outputs)
    run._release(i)
