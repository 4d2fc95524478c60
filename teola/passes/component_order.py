"""Experiment pass (off by default): run chosen components in turn instead of overlapped. Options:
`order`: [[first, then], ...] component names; every primitive of `then` waits for every primitive
of `first`. For measuring what overlapping two components buys (e.g. query expansion and indexing
on engines that share cores): `{"passes": {"component_order": {"order": [["query_expansion", "indexing"]]}}}`.
`order_components` is the mechanism, shared with the module_chain baseline."""

from __future__ import annotations

from typing import Any

import networkx as nx

from teola.ir.graph import Graph
from teola.passes.result import PassResult


def members_of(graph: Graph) -> dict[str, list[int]]:
    """Primitive ids by component, components in the graph's topological order."""
    members: dict[str, list[int]] = {}
    for p in graph.primitives:
        members.setdefault(p.component, []).append(p.id)
    return members


def order_components(graph: Graph, pairs: list[tuple[str, str]] | list[list[str]]) -> tuple[Graph, bool]:
    """A copy of `graph` where every primitive of `then` waits for every primitive of `first`, for
    each (first, then) in `pairs` (explicit ordering edges, which dependency pruning keeps), and
    whether an edge was added. ValueError for unknown components; a component of the template
    that an earlier pass left without primitives has nothing to order."""
    g = graph.copy()
    members = members_of(g)
    known = set(members) | set(g.components)
    modified = False
    for first, then in pairs:
        for name in (first, then):
            if name not in known:
                raise ValueError(f"no component {name!r} in this graph; components: {sorted(known)}")
        for u in members.get(first, ()):
            for v in members.get(then, ()):
                if not g.nx.has_edge(u, v):
                    g.nx.add_edge(u, v, order=True)
                    modified = True
    return g, modified


def component_order(graph: Graph, order: Any = ()) -> PassResult:
    if not isinstance(order, (list, tuple)) or not all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(c, str) for c in p) for p in order
    ):
        raise ValueError(
            f"component_order: option 'order' must be a list of [first, then] component names, got {order!r}"
        )
    try:
        g, modified = order_components(graph, list(order))
    except ValueError as e:
        raise ValueError(f"component_order: {e}") from None
    if modified and not nx.is_directed_acyclic_graph(g.nx):
        raise ValueError(f"component_order: {order!r} contradicts the graph's data dependencies (a cycle)")
    return PassResult(g, modified)
