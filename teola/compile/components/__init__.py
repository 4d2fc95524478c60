"""Component kinds: each decomposes one template node into primitives (Teola Algorithm 1)."""

from __future__ import annotations

from collections.abc import Callable

from teola.compile.components.agent import decompose_agent
from teola.compile.components.context import BuildContext, Port, SubGraph
from teola.compile.components.control import decompose_aggregate, decompose_condition
from teola.compile.components.expansion import decompose_query_expansion
from teola.compile.components.indexing import decompose_indexing, decompose_ingestion
from teola.compile.components.llm import decompose_llm
from teola.compile.components.options import BUILTIN_OPTIONS, Options
from teola.compile.components.retrieval import (
    decompose_query_embedding,
    decompose_rerank,
    decompose_vector_search,
    decompose_web_search,
)
from teola.compile.components.synthesis import decompose_synthesis
from teola.compile.components.tool_call import decompose_tool

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
    "agent": (decompose_agent, True, False),
    "web_search": (decompose_web_search, True, False),
    "tool": (decompose_tool, True, False),
    "condition": (decompose_condition, False, False),
    "aggregate": (decompose_aggregate, False, False),  # called with its parents' exports
}


_OPTIONS: dict[str, type[Options]] = dict(BUILTIN_OPTIONS)


def register_component(
    kind: str,
    fn: Decomposer,
    needs_engine: bool = True,
    splittable: bool = False,
    options: type[Options] | None = None,
) -> None:
    """Add a component kind: `fn(ctx)` adds primitives with `ctx.add(...)` and fills
    `ctx.sub.exports` with the ports it offers downstream. `options`, a subclass of
    `teola.compile.components.options.Options`, types and bounds the keys its nodes' config may hold
    (without it any keys pass and `fn` checks them)."""
    if not isinstance(kind, str) or not kind:
        raise ValueError("component kind must be a non-empty string")
    if options is not None and not (isinstance(options, type) and issubclass(options, Options)):
        raise TypeError(
            "register_component(options=...) takes a subclass of teola.compile.components.options.Options"
        )
    _KINDS[kind] = (fn, needs_engine, splittable)
    if options is None:
        _OPTIONS.pop(kind, None)
    else:
        _OPTIONS[kind] = options


def options_model(kind: str) -> type[Options] | None:
    """The options model of a component kind (None: the kind declares none)."""
    return _OPTIONS.get(kind)


def component_kinds() -> list[str]:
    return sorted(_KINDS)


def lookup(kind: str) -> tuple[Decomposer, bool, bool]:
    if kind not in _KINDS:
        raise ValueError(f"unknown component kind {kind!r}; known kinds: {', '.join(component_kinds())}")
    return _KINDS[kind]


__all__ = [
    "BuildContext",
    "Options",
    "Port",
    "SubGraph",
    "register_component",
    "component_kinds",
    "lookup",
    "options_model",
]
