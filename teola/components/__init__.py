"""Component kinds: each decomposes one template node into primitives (Teola Algorithm 1)."""
from __future__ import annotations

from typing import Callable

from teola.components.context import BuildContext, Port, SubGraph
from teola.components.control import decompose_aggregate, decompose_condition
from teola.components.expansion import decompose_query_expansion
from teola.components.indexing import decompose_indexing, decompose_ingestion
from teola.components.llm import decompose_llm
from teola.components.retrieval import (decompose_query_embedding, decompose_rerank, decompose_vector_search,
                                        decompose_web_search)
from teola.components.synthesis import decompose_synthesis
from teola.components.tool_call import decompose_tool

Decomposer = Callable[[BuildContext], None]

# kind -> (decomposer, whether the node needs an engine, whether its output may be splittable)
_KINDS: dict[str, tuple[Decomposer, bool, bool]] = {
    "indexing": (decompose_indexing, True, False),
    "ingestion": (decompose_ingestion, True, False),
    "query_expansion": (decompose_query_expansion, True, True),
    "query_embedding": (decompose_query_embedding, True, False),
    "search": (decompose_vector_search, True, False),
    "rerank": (decompose_rerank, True, False),
    "synthesis": (decompose_synthesis, True, False),
    "llm": (decompose_llm, True, True),
    "web_search": (decompose_web_search, True, False),
    "tool": (decompose_tool, True, False),
    "condition": (decompose_condition, False, False),
    "aggregate": (decompose_aggregate, False, False),  # called with its parents' exports
}


def register_component(kind: str, fn: Decomposer, needs_engine: bool = True, splittable: bool = False) -> None:
    """Add a component kind: `fn(ctx)` adds primitives with `ctx.add(...)` and fills
    `ctx.sub.exports` with the ports it offers downstream."""
    if not isinstance(kind, str) or not kind:
        raise ValueError("component kind must be a non-empty string")
    _KINDS[kind] = (fn, needs_engine, splittable)


def component_kinds() -> list[str]:
    return sorted(_KINDS)


def lookup(kind: str) -> tuple[Decomposer, bool, bool]:
    if kind not in _KINDS:
        raise ValueError(f"unknown component kind {kind!r}; known kinds: {', '.join(component_kinds())}")
    return _KINDS[kind]


__all__ = ["BuildContext", "Port", "SubGraph", "register_component", "component_kinds", "lookup"]
