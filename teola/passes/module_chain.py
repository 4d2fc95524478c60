"""Baseline pass (off by default): run components one after another, as a module-level chain
does (LlamaIndex-style orchestration; the LlamaDist baseline of Teola §7). Every primitive of a
component waits for every primitive of the component before it in template order."""
from __future__ import annotations

import networkx as nx

from teola.graph import Graph
from teola.passes.result import PassResult


def module_chain(graph: Graph) -> PassResult:
    g = graph.copy()
    order: list[str] = []
    members: dict[str, list[int]] = {}
    for p in g.primitives:  # topological order, so components appear in a dependency-respecting order
        if p.component not in members:
            order.append(p.component)
            members[p.component] = []
        members[p.component].append(p.id)
    modified = False
    for prev, nxt in zip(order, order[1:]):
        for u in members[prev]:
            for v in members[nxt]:
                if not g.nx.has_edge(u, v):
                    g.nx.add_edge(u, v, order=True)  # an explicit ordering constraint: pruning keeps it
                    modified = True
    if modified and not nx.is_directed_acyclic_graph(g.nx):
        raise ValueError("module_chain must run on a p-graph whose components do not interleave; "
                         "turn the other passes off for this baseline")
    return PassResult(g, modified)
