"""Pass 0b, speculative search: a remote search behind a condition starts before the condition is
decided, when what it searches for does not depend on the decision.

In search-engine-empowered generation (Teola Fig. 2a) a judge LLM decides whether to search, and
the search looks up the question itself. The search waits for the judge only because the
template puts it behind the condition; its input is ready at once. A remote search API costs
this machine no compute, only waiting, so the pass moves the condition's guard from the search to
the primitives that read its results: the search runs while the judge decodes, and its readers
still run only if the condition says yes. When it says no, the runtime discards the search (its
result is never read, the query does not wait for it) and a failure of the discarded search fails
nothing; when it says yes, a failed search fails the query as before. The price is one search
call that the condition would have avoided. Only searches on remote engines
(`EngineInfo.remote`: an HTTP API) are moved: a local search would take cores from the judge.
Turn it off per query with `{"passes": {"speculative_search": false}}`.

The moved search carries `args["speculate_on"]` = the branch key it used to be guarded by.
"""

from __future__ import annotations

import networkx as nx

from teola.ir.graph import Graph
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.passes.result import PassResult


def speculative_search(graph: Graph) -> PassResult:
    g = graph.copy()
    writers = g.producers()
    modified = False
    for p in g.find(PrimOp.SEARCHING):
        guard = p.args.get("guard")
        if guard is None or guard not in writers or not _remote(g, p):
            continue
        cond = g[writers[guard]]
        if cond.op is not PrimOp.CONDITION or not independent(g, p, cond, writers):
            continue
        readers = [c for k in p.outputs for c in g.consumers(k)]
        if any(c.args.get("guard") not in (None, guard) for c in readers):
            continue  # a reader behind another condition: keep it simple, do not speculate
        _move_guard(g, p, cond, guard, readers)
        modified = True
    return PassResult(g, modified)


def _remote(g: Graph, p: Primitive) -> bool:
    info = g.engines.get(p.engine or "")
    return bool(info is not None and info.remote)


def independent(g: Graph, p: Primitive, cond: Primitive, writers: dict[str, int]) -> bool:
    """Every input of `p` but its guard is a query input or written by a primitive that does not
    come after the condition (`writers`: key -> writer id)."""
    after = nx.descendants(g.nx, cond.id) | {cond.id}
    return all(writers.get(k) not in after for k in p.inputs if k != p.args.get("guard"))


def _move_guard(g: Graph, p: Primitive, cond: Primitive, guard: str, readers: list[Primitive]) -> None:
    p.inputs = tuple(k for k in p.inputs if k != guard)
    del p.args["guard"]
    p.args["speculate_on"] = guard
    if g.nx.has_edge(cond.id, p.id) and not set(cond.outputs) & set(p.inputs):
        g.disconnect(cond, p)
    for r in readers:
        if r.args.get("guard") is None:
            r.inputs = r.inputs + (guard,)
            r.args["guard"] = guard
        if not g.nx.has_edge(cond.id, r.id):
            g.connect(cond, r)
