"""Pass 0c, speculative call: an LLM call behind a condition starts before the condition is
decided, when its prompt does not depend on the decision.

In search-engine-empowered generation (Teola Fig. 2a) the core LLM answers from the question and
the search results. Once `speculative_search` has started the search with the judge, the core's
whole prompt is ready while the judge still decodes, yet the core waits for the judge's verdict.
This pass lets the call run at once: its prefill and the decodes that read it are marked
`args["speculate_on"]` = the branch key, and the condition guards the primitives that read the
call's text instead (a reader that merges branches, an AGGREGATE in mode "first", reads it through
a gate: a control primitive guarded by the branch). The query's answer is the one it had without
the pass. When the condition says no, the runtime discards the call: queued work leaves the engine
queue and a running call is aborted in the engine (vLLM stops decoding it and frees its blocks).

The price is the work a "no" throws away: the call's prefill and its decode steps until the
verdict. On vLLM a second sequence decoding beside the judge costs little (a decode step of the
135M model on 2 CPU cores: 32.5 ms at batch 1, 32.6 ms at batch 2,
bench/results/sim/sim_fidelity_each.md). Turn it off per query with
`{"passes": {"speculative_call": false}}` where the condition often says no and the engine is
saturated.

A call is moved only when its decodes read nothing but its prefill (and keys ready before the
condition), it is not the query's output itself, and each reader of its text is either unguarded
or an AGGREGATE; otherwise it keeps its guard.
"""

from __future__ import annotations

from teola.ir.graph import Graph
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.passes.result import PassResult
from teola.passes.speculative_search import independent

_PREFILLS = (PrimOp.PREFILLING, PrimOp.FULL_PREFILLING)
_DECODES = (PrimOp.DECODING, PrimOp.PARTIAL_DECODING)


def speculative_call(graph: Graph) -> PassResult:
    g = graph.copy()
    writers = g.producers()  # keys -> writers: moving guards and adding gates changes no key's writer
    modified = False
    for p in [q for q in g if q.op in _PREFILLS]:
        guard = p.args.get("guard")
        if guard is None or guard not in writers:
            continue
        cond = g[writers[guard]]
        if cond.op is not PrimOp.CONDITION or not independent(g, p, cond, writers):
            continue
        call = _call(g, p, guard, cond, writers)
        if call is None:
            continue
        _speculate(g, p, call[0], call[1], cond, guard)
        modified = True
    return PassResult(g, modified)


def _call(
    g: Graph, p: Primitive, guard: str, cond: Primitive, writers: dict[str, int]
) -> tuple[list[Primitive], list[Primitive]] | None:
    """The decodes of the call `p` starts and the readers of their text, or None when the call
    cannot be moved."""
    decodes = [c for k in p.outputs for c in g.consumers(k)]
    if not decodes or any(
        d.op not in _DECODES or d.engine != p.engine or d.args.get("guard") not in (None, guard)
        for d in decodes
    ):
        return None
    own = set(p.outputs)
    for d in decodes:
        if not independent(g, d, cond, {k: w for k, w in writers.items() if k not in own}):
            return None
        if set(d.outputs) & set(g.outputs):
            return None  # the call's text is the query's answer: nothing could take its place on "no"
    ids = {p.id} | {d.id for d in decodes}
    readers = {r.id: r for d in decodes for k in d.outputs for r in g.consumers(k) if r.id not in ids}
    if not readers or any(
        r.op is not PrimOp.AGGREGATE and r.args.get("guard") not in (None, guard) for r in readers.values()
    ):
        return None
    return decodes, list(readers.values())


def _speculate(
    g: Graph, p: Primitive, decodes: list[Primitive], readers: list[Primitive], cond: Primitive, guard: str
) -> None:
    for q in (p, *decodes):
        if q.args.pop("guard", None) is not None:
            q.inputs = tuple(k for k in q.inputs if k != guard)
        if g.nx.has_edge(cond.id, q.id) and not set(cond.outputs) & set(q.inputs):
            g.disconnect(cond, q)
        q.args["speculate_on"] = guard
    texts = {k: d for d in decodes for k in d.outputs}
    for r in readers:
        if r.op is PrimOp.AGGREGATE:
            _gate(g, r, texts, cond, guard)
            continue
        if r.args.get("guard") is None:
            r.inputs = r.inputs + (guard,)
            r.args["guard"] = guard
        if not g.nx.has_edge(cond.id, r.id):
            g.connect(cond, r)


def _gate(g: Graph, r: Primitive, texts: dict[str, Primitive], cond: Primitive, guard: str) -> None:
    """`r` reads each speculative text through a gate that passes it on only on "yes"."""
    inputs = list(r.inputs)
    for j, k in enumerate(inputs):
        d = texts.get(k)
        if d is None:
            continue
        gate = g.add(
            Primitive(
                PrimOp.AGGREGATE,
                None,
                d.component,
                inputs=(k, guard),
                outputs=(f"{k}.taken",),
                args={"mode": "first", "guard": guard},
                label=f"{d.label}.gate",
            )
        )
        g.connect(d, gate)
        g.connect(cond, gate)
        g.connect(gate, r)
        inputs[j] = gate.outputs[0]
    r.inputs = tuple(inputs)
    for d in {d.id: d for d in texts.values()}.values():
        if g.nx.has_edge(d.id, r.id) and not set(d.outputs) & set(r.inputs):
            g.disconnect(d, r)
