"""Experiment pass (off by default): run chosen components in turn instead of overlapped. Options:
`order`: [[first, then], ...] component names; every primitive of `then` waits for every primitive
of `first`. For measuring what overlapping two components buys (e.g. query expansion and indexing
on engines that share cores): `{"passes": {"component_order": {"order": [["query_expansion", "indexing"]]}}}`."""
from __future__ import annotations

from typing import Any

import networkx as nx

from teola.graph import Graph
from teola.passes.result import PassResult


def component_order(graph: Graph, order: Any = ()) -> PassResult:
    if not isinstance(order, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(c, str) for c in p) for p in order):
        raise ValueError(f"component_order: option 'order' must be a list of [first, then] component names, got {order!r}")
    g = graph.copy()
    members: dict[str, list[int]] = {}
    for p in g.primitives:
        members.setdefault(p.component, []).append(p.id)
    modified = False
    for first, then in order:
        for name in (first, then):
            if name not in members:
                raise ValueError(f"component_order: no component {name!r} in this graph; components: {sorted(members)}")
        for u in members[first]:
            for v in members[then]:
                if not g.nx.has_edge(u, v):
                    g.nx.add_edge(u, v, order=True)  # an explicit ordering constraint
                    modified = True
    if modified and not nx.is_directed_acyclic_graph(g.nx):
        raise ValueError(f"component_order: {order!r} contradicts the graph's data dependencies (a cycle)")
    return PassResult(g, modified)
