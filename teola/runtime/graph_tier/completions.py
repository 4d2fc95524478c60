"""A query's dispatches coming back from the engine tier: their outputs go into the query's object
store, their primitives' trace rows are finished and counted, and the primitives are released.
`QueryRun.work_done`, `stream_item` and `stream_final` hand each `DispatchWork` here by kind: a
primitive, a prefill fused with its decode, or a stream group's items and final result."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.runtime.graph_tier.dispatch_kind import DispatchKind
from teola.runtime.graph_tier.query_state import DONE, QueryState
from teola.runtime.graph_tier.query_work import DispatchWork
from teola.runtime.outputs import collect_outputs
from teola.runtime.trace_row import TraceRow, llm_extras
from teola.runtime.trace_status import TraceStatus


def count_primitive(run: QueryState, p: Primitive, tr: TraceRow) -> None:
    """A primitive finished: the runtime's counters see it and its time from queued to finished."""
    m = run.ctx.metrics
    m.primitives += 1
    assert tr["finished"] is not None
    m.observe_op(p.op.value, tr["finished"] - tr["queued"])


def finish_trace(run: QueryState, i: int, t: float, extras: Any = None) -> TraceRow:
    tr = run.trace[i]
    assert tr is not None
    tr["finished"] = t - run.t0
    tr["status"] = TraceStatus.OK
    if isinstance(extras, dict):
        llm_extras(tr, extras)
    count_primitive(run, run.plan.prims[i], tr)
    run.emit_primitive(tr)
    return tr


def work_done(run: QueryState, work: DispatchWork, t: float) -> None:
    run.close_work(work)
    plan, values = run.plan, run.values
    if work.kind is DispatchKind.PRIM:
        p = plan.prims[work.idx]
        values.update(collect_outputs(p, work.requests, work.res))
        extras = work.res[0] if p.op.value in _LLM_OP_VALUES else None
        if extras is not None:
            run.ctx.metrics.observe_llm(extras)
        tr = finish_trace(run, work.idx, t, extras)
        if p.op is PrimOp.TOOL:
            run.ctx.tool_done(p.args, work.requests, tr)
        run.release(work.idx)
        return
    # fused prefill + decoding
    prefill = work.prefill
    assert prefill is not None
    pre, d = plan.prims[prefill], plan.prims[work.idx]
    result = work.res[0]
    run.ctx.metrics.observe_llm(result)
    values[pre.outputs[0]] = _fused_state(work.requests[0], result)
    values.update(collect_outputs(d, work.requests, work.res))
    finish_trace(run, prefill, t, result)["fused_into"] = d.name
    finish_trace(run, work.idx, t, result)["fused_with"] = pre.name
    run.state[work.idx] = DONE
    run.release(prefill)


def _stream_prefill_done(run: QueryState, work: DispatchWork, t: float, result: Any = None) -> None:
    if work.prefill is not None and run.state[work.prefill] < DONE:
        pre = run.plan.prims[work.prefill]
        run.values[pre.outputs[0]] = _fused_state(
            work.requests[0], result if isinstance(result, dict) else {}
        )
        finish_trace(run, work.prefill, t)["fused_into"] = run.plan.prims[work.members[0]].name
        run.release(work.prefill)


def stream_item(run: QueryState, work: DispatchWork, text: str, t: float) -> None:
    _stream_prefill_done(run, work, t)
    k = work.items
    work.items += 1
    if k >= len(work.members):
        work.extra_items += 1
        return
    _member_done(run, work.members[k], [text], t)


def stream_final(run: QueryState, work: DispatchWork, result: Any, t: float) -> None:
    run.close_work(work)
    run.ctx.metrics.observe_llm(result)
    _stream_prefill_done(run, work, t, result)
    for m in work.members[work.items :]:
        _member_done(run, m, [], t)
    for m in (*work.members, *(() if work.prefill is None else (work.prefill,))):  # the call's token counts
        tr = run.trace[m]
        if isinstance(result, dict) and tr is not None:
            llm_extras(tr, result)
    last = run.trace[work.members[-1]]
    if work.extra_items and last is not None:
        last["dropped_items"] = work.extra_items


def _member_done(run: QueryState, m: int, value: list[Any], t: float) -> None:
    p = run.plan.prims[m]
    run.values[p.outputs[0]] = value
    finish_trace(run, m, t)
    run.state[m] = DONE
    if run.indeg[m] == 0:
        run.release(m)


_LLM_OP_VALUES = frozenset(
    {
        PrimOp.PREFILLING.value,
        PrimOp.PARTIAL_PREFILLING.value,
        PrimOp.FULL_PREFILLING.value,
        PrimOp.DECODING.value,
    }
)


def _fused_state(request: Mapping[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = {"parts": request["parts"], "fused": True}
    for k in ("num_prompt_tokens", "num_cached_tokens"):
        if k in result:
            state[k] = result[k]
    return state
