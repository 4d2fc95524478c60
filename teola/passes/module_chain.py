"""Baseline pass (off by default): run components one after another, as a module-level chain
does (LlamaIndex-style orchestration; the LlamaDist baseline of Teola §7). Every primitive of a
component waits for every primitive of the component before it in template order."""

from __future__ import annotations

import networkx as nx

from teola.ir.graph import Graph
from teola.passes.component_order import members_of, order_components
from teola.passes.result import PassResult


def module_chain(graph: Graph) -> PassResult:
    order = list(
        members_of(graph)
    )  # topological order, so components appear in a dependency-respecting order
    g, modified = order_components(graph, list(zip(order, order[1:])))
    if modified and not nx.is_directed_acyclic_graph(g.nx):
        raise ValueError(
            "module_chain must run on a p-graph whose components do not interleave; "
            "turn the other passes off for this baseline"
        )
    return PassResult(g, modified)
