"""Pass 4, decode pipelining: a `splittable` Decoding becomes one Partial Decoding per item; each
item goes downstream as soon as it is parsed from the stream, and readers that map over the items
are split per item so each one starts on its own item."""
from __future__ import annotations

from teola.ir.graph import Graph
from teola.ir.ops import PrimOp
from teola.ir.refs import part_key
from teola.passes.result import PassResult
from teola.passes.split_map import redistribute


def decode_pipelining(graph: Graph) -> PassResult:
    g = graph.copy()
    modified = False
    for d in g.find(PrimOp.DECODING):
        n = d.args.get("n_items", 0)
        if not d.args.get("splittable") or n < 1:
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
