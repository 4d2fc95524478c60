"""Primitives started before the condition that guards their readers is decided (the
`speculative_search` and `speculative_call` passes mark them with `args["speculate_on"]` = the
branch key).

When the condition is decided: "no" (or the condition itself skipped) discards every speculative
primitive still running or queued (its queued work leaves the engine queue, a running LLM call is
aborted in the engine, any other batch already on an engine lands unread, the query does not wait
for it); "yes" fails the query if one of them failed meanwhile. A speculative primitive that fails
before the decision is held until it (`defer`), and so is the text a speculative call streams
(`hold`): "yes" sends it on, "no" drops it."""

from __future__ import annotations

from teola.ir.primitive import Primitive
from teola.runtime.errors import QueryError
from teola.runtime.graph_tier.query_state import RELEASED, QueryState
from teola.runtime.trace_status import TraceStatus


def undecided(run: QueryState, idx: int) -> bool:
    """Whether `idx` is speculative and its condition has not been decided yet."""
    key = run.plan.prims[idx].args.get("speculate_on")
    return key is not None and key not in run.values and key not in run.skipped


def defer(run: QueryState, idx: int, err: QueryError, cause: BaseException) -> None:
    """A speculative primitive failed before its condition was decided: hold the error."""
    run.deferred[idx] = (err, cause)


def abort_keys(run: QueryState, p: Primitive, n: int) -> list[str | None]:
    """The abort key of each of `p`'s `n` requests, handed to the engine tier at submission: a
    speculative LLM call's keys name the call, so that a "no" can abort that call alone in the
    engine (`EngineScheduler.remove`); None for any other call."""
    if "speculate_on" in p.args and p.engine in run.ctx.llm_engines:
        return [f"{run.qid}:{p.name}:{j}" for j in range(n)]
    return [None] * n


def hold(run: QueryState, idx: int, text: str) -> None:
    """An undecided speculative call streamed `text`: keep it until the decision."""
    run.held.setdefault(idx, []).append(text)


def discarded(run: QueryState, idx: int) -> bool:
    """Whether `idx` was a speculative primitive its condition discarded (its results are dropped)."""
    return run.state[idx] == RELEASED and "speculate_on" in run.plan.prims[idx].args


def settle(run: QueryState, key: str) -> None:
    """The condition writing `key` was decided (or skipped): act on its speculative primitives."""
    yes = key not in run.skipped and run.values.get(key) is True
    for i in run.plan.speculative.get(key, ()):
        held = run.held.pop(i, ())
        if yes:
            if i in run.deferred:
                err, cause = run.deferred.pop(i)
                run.fail(err, cause)
                return
            for text in held:
                run.emit({"event": "token", "primitive": run.plan.prims[i].name, "text": text})
            continue
        run.deferred.pop(i, None)
        if run.state[i] != RELEASED:
            _discard(run, i)


def _discard(run: QueryState, i: int) -> None:
    p = run.plan.prims[i]
    for w in [w for w in run.works if w.idx == i]:
        run.close_work(w)
        if w.entry is not None:
            run.ctx.withdraw(p.engine, w.entry)
    t = run.loop.time() - run.t0
    tr = run.trace[i]
    if tr is None:
        tr = run.trace[i] = run.new_trace(p, TraceStatus.DISCARDED, t)
        tr["started"] = t
    tr.update({"status": TraceStatus.DISCARDED, "finished": t})
    run.ctx.metrics.discarded += 1
    run.skipped.update(p.outputs)
    run.release(i)
