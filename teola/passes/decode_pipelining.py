"""Pass 4, decode pipelining: a `splittable` Decoding becomes one Partial Decoding per item; each
item goes downstream as soon as it is parsed from the stream, and readers that map over the items
are split per item so each one starts on its own item.

A decode is split only where the engine's known costs predict it pays
(`teola.passes.decode_pipelining_cost`: the decode left after the first item, which the items'
readers overlap, against the requests the split readers add); without known costs every splittable
decode is, and `gate=False` splits every one."""
from __future__ import annotations

from engines.requests import DECODE_OPS, PREFILL_OPS
from teola.ir.graph import Graph
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.ir.refs import part_key
from teola.passes.decode_pipelining_cost import predicted_gain
from teola.passes.engine_costs import costs_for, record
from teola.passes.result import PassResult
from teola.passes.split_map import redistribute

DEFAULT_MAX_TOKENS = 128  # a decode's default max_tokens (teola.compile.components.options)


def decode_pipelining(graph: Graph, gate: bool = True, profile: str | None = None) -> PassResult:
    """gate: split only where the predicted gain is positive; profile: the LLM engines' costs to
    predict with (a shipped profile's name or a file; default: the costs the decode's engine reported
    at start; with none known every splittable decode is split)."""
    g = graph.copy()
    modified = False
    for d in g.find(PrimOp.DECODING):
        n = d.args.get("n_items", 0)
        if not d.args.get("splittable") or n < 1:
            continue
        if gate and not _pays(g, d, n, profile):
            continue
        out = d.outputs[0]
        readers = [c for c in g.consumers(out)]
        parts = []
        for i in range(n):
            pd = g.add(d.clone(op=PrimOp.PARTIAL_DECODING, outputs=(part_key(out, i, i + 1),),
                               label=f"{d.label}[{i}]"))
            pd.args.update(item=i, stream=out)
            for q in g.parents(d):
                g.connect(q, pd)
            parts.append(pd.outputs[0])
        g.remove(d)
        redistribute(g, out, [(i, i + 1) for i in range(n)], parts, readers, d.component)
        modified = True
    return PassResult(g, modified)


def _pays(g: Graph, d: Primitive, n: int, profile: str | None) -> bool:
    """Whether splitting `d` is predicted to pay (True when its engine's costs are unknown); with known
    costs the decision is recorded in the graph."""
    costs = costs_for(g, d.engine, profile)
    if costs is None:
        return True
    readers = [costs_for(g, r.engine, profile) for r in g.consumers(d.outputs[0])
               if r.args.get("map") and r.op in PREFILL_OPS | DECODE_OPS]
    gain = predicted_gain(int(d.args.get("max_tokens") or DEFAULT_MAX_TOKENS), n, costs,
                          sum(c.request_s for c in readers if c is not None))
    record(g, "decode_pipelining", d.name, "pipelined" if gain > 0 else "kept whole", gain, costs)
    return gain > 0
