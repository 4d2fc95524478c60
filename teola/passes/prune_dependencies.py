"""Pass 1, dependency pruning: keep an edge only where the child reads an output of the parent
(or where a pass marked it as an explicit ordering constraint, `order=True`)."""

from __future__ import annotations

from teola.ir.graph import Graph
from teola.passes.result import PassResult


def prune_dependencies(graph: Graph) -> PassResult:
    g = graph.copy()
    dead = [
        (u, v)
        for u, v, order in g.nx.edges(data="order")
        if not order and not set(g[u].outputs) & set(g[v].inputs)
    ]
    g.nx.remove_edges_from(dead)
    return PassResult(g, bool(dead))
