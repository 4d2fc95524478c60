"""Validation of a workflow template (the nodes an app passes to `update_template`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import networkx as nx

from teola.compile.components import lookup
from teola.ir.engine_spec import Engine
from teola.ir.node import Node
from teola.ir.ops import LLM_OPS


def validate_template(nodes: Iterable[object], engines: dict[str, Engine]) -> list[Node]:
    """Check a template and return its nodes in a stable topological order.

    Raises TypeError for a non-Node, ValueError for: duplicate names, an edge to a node not in the
    template, a cycle, an unknown kind or engine, a control node given an engine, an LLM-only
    annotation on a non-LLM node."""
    given = list(nodes)
    if not given:
        raise ValueError("a template needs at least one Node")
    for entry in given:
        if not isinstance(entry, Node):
            raise TypeError(f"template entries must be Node objects, got {entry!r}")
    checked = [entry for entry in given if isinstance(entry, Node)]
    names: dict[str, Node] = {}
    for n in checked:
        if n.name in names:
            raise ValueError(f"two nodes are named {n.name!r}; give one a different name=...")
        names[n.name] = n
    g = nx.DiGraph()
    for i, n in enumerate(checked):
        g.add_node(n.name, order=i)
    members = set(map(id, checked))
    for n in checked:
        for d in n.downstream:
            if id(d) not in members:
                raise ValueError(
                    f"node {n.name!r} >> {d.name!r}, but {d.name!r} is not in the template; "
                    "add it to update_template([...])"
                )
            g.add_edge(n.name, d.name)
    if not nx.is_directed_acyclic_graph(g):
        cycle = " >> ".join(u for u, _ in nx.find_cycle(g))
        raise ValueError(f"the template has a cycle: {cycle} >> ...; templates must be acyclic")
    for n in checked:
        _, needs_engine, splittable = lookup(n.kind)
        if needs_engine:
            if n.engine is None:
                raise ValueError(
                    f"node {n.name!r} ({n.kind}) needs engine=...; registered engines: {sorted(engines)}"
                )
            if n.engine not in engines:
                raise ValueError(
                    f"node {n.name!r} uses engine {n.engine!r}, which is not registered; "
                    f"register it with app.register_engine(Engine({n.engine!r}, kind=...)) "
                    f"or use one of {sorted(engines)}"
                )
        elif n.engine is not None:
            raise ValueError(
                f"node {n.name!r} ({n.kind}) is a control node and runs on no engine; drop engine="
            )
        if n.anno == "splittable":
            is_llm = n.engine is not None and n.engine in engines and engines[n.engine].ops & LLM_OPS
            if not (splittable and is_llm):
                raise ValueError(
                    f"node {n.name!r} ({n.kind}): anno='splittable' applies only to LLM nodes whose "
                    "output is a list (query_expansion, llm with split=...); remove it"
                )
    order = nx.lexicographical_topological_sort(g, key=lambda name: g.nodes[name]["order"])
    return [names[name] for name in order]


def placeholder_query(nodes: Iterable[Node]) -> dict[str, Any]:
    """The small query that compiles for any template (to validate it and to show its graph): a
    question, one document, and "sample" for every other `$query.<field>` a node's prompt reads."""
    query: dict[str, Any] = {"question": "What is this about?", "documents": ["A short sample document."]}
    for node in nodes:
        parts = node.config.get("parts")
        for part in parts if isinstance(parts, list) else []:
            src = part[1] if isinstance(part, (list, tuple)) and len(part) == 2 else None
            if isinstance(src, str) and src.startswith("$query."):
                query.setdefault(src[len("$query.") :], "sample")
    return query
