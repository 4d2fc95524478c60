"""Engine kinds by name: `Engine("llm", kind="vllm", ...)` -> an adapter instance.

Adapters import heavy libraries (vllm, torch, psycopg) lazily, so the table holds import paths.
Users add kinds with `register_engine_kind("mykind", factory)`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engines.protocol import EngineBackend, EngineProfile

_KINDS: dict[str, str | Callable[..., EngineBackend]] = {
    "vllm": "engines.vllm.engine:VLLMEngine",
    "sentence_transformers": "engines.sentence_transformers.embedding:EmbeddingEngine",
    "reranker": "engines.sentence_transformers.reranker:RerankerEngine",
    "pgvector": "engines.postgres.vector_store:PgVectorEngine",
    "search": "engines.search.remote_search:search_engine",
    "tool": "engines.tools.tool_engine:ToolEngine",
    "openai": "engines.openai.engine:openai_engine",
}


def register_engine_kind(kind: str, factory: Callable[..., EngineBackend]) -> None:
    """Make `Engine(name, kind=kind, **options)` build `factory(name, **options)`."""
    if not isinstance(kind, str) or not kind:
        raise ValueError("engine kind must be a non-empty string")
    _KINDS[kind] = factory


def engine_kinds() -> list[str]:
    return sorted(_KINDS)


def kind_defaults(
    kind: str, options: dict[str, Any] | None = None
) -> tuple[frozenset[str], EngineProfile] | None:
    """What an engine kind's adapter declares about itself: its ops and its default profile
    (max batch, max efficient batch), read from the adapter class (`ops`, `default_profile`)
    without building it. A factory whose adapter depends on the options declares
    `defaults_for(options)` instead. None for an unknown kind or a factory that declares neither."""
    target = _KINDS.get(kind)
    if target is None:
        return None
    if isinstance(target, str):
        module, attr = target.split(":")
        target = getattr(importlib.import_module(module), attr)
    defaults_for = getattr(target, "defaults_for", None)
    if callable(defaults_for):
        return defaults_for(dict(options or {}))
    ops = getattr(target, "ops", None)
    if not isinstance(ops, frozenset):
        return None
    profile = getattr(target, "default_profile", None)
    return ops, profile if isinstance(profile, EngineProfile) else EngineProfile()


def kind_continuous(kind: str, options: dict[str, Any] | None = None) -> bool:
    """Whether an engine kind's adapter batches continuously (each request of a batch runs and
    ends on its own, as in vLLM), as it declares with `continuous = True` or, when that depends on
    the options, `continuous_for(options)`. False for unknown and custom kinds."""
    target = _KINDS.get(kind)
    if isinstance(target, str):
        module, attr = target.split(":")
        target = getattr(importlib.import_module(module), attr)
    continuous_for = getattr(target, "continuous_for", None)
    if callable(continuous_for):
        return bool(continuous_for(dict(options or {})))
    return getattr(target, "continuous", False) is True


def kind_ranks_by(kind: str, options: dict[str, Any] | None = None) -> str:
    """What the scores of an engine kind's output rank by, as its adapter declares with
    `ranks_by(options)`: "cosine:<model>" for an embedder (the cosine of its vectors) or a reranker
    scoring by that cosine, "cosine" for a vector store whose searches of a query's own namespace
    rank exactly by the cosine of the stored vectors; "" when unknown (a cross-encoder, a custom kind).
    Passes compare these to prove that two rankings are the same. A built adapter says the same in
    its `ranking` attribute (`backend_ranks_by`)."""
    target = _KINDS.get(kind)
    if isinstance(target, str):
        module, attr = target.split(":")
        target = getattr(importlib.import_module(module), attr)
    ranks_by = getattr(target, "ranks_by", None)
    return ranks_by(dict(options or {})) if callable(ranks_by) else ""


def kind_tokenizer_dir(kind: str, options: dict[str, Any] | None = None) -> Path | None:
    """The local folder holding the tokenizer of an engine kind's model (its `tokenizer.json`), as
    its adapter declares with `tokenizer_dir(options)`; None when the kind declares none or the
    model is not on disk. Chunk sizes are counted in this tokenizer (teola.compile.chunk_tokenizer)."""
    target = _KINDS.get(kind)
    if isinstance(target, str):
        module, attr = target.split(":")
        target = getattr(importlib.import_module(module), attr)
    tokenizer_dir = getattr(target, "tokenizer_dir", None)
    return tokenizer_dir(dict(options or {})) if callable(tokenizer_dir) else None


def backend_ranks_by(backend: Any) -> str:
    """What a built adapter's scores rank by (its `ranking` attribute; "" if it declares none)."""
    ranking = getattr(backend, "ranking", "")
    return ranking if isinstance(ranking, str) else ""


def create_engine(name: str, kind: str, options: dict[str, Any]) -> EngineBackend:
    """Build (not start) the adapter for one engine instance. A kind of the form
    "package.module:Class" imports that class (this works in other processes too, e.g. Ray actors).
    With the option `simulate=<profile>` the adapter is the kind's simulated engine (engines.sim.profile)."""
    if options.get("simulate"):
        from engines.sim.profile import simulated_engine

        rest = {k: v for k, v in options.items() if k != "simulate"}
        return simulated_engine(name, kind, options["simulate"], rest)
    if kind not in _KINDS and ":" in kind:
        module, attr = kind.split(":", 1)
        return getattr(importlib.import_module(module), attr)(name, **options)
    if kind not in _KINDS:
        raise ValueError(f"engine {name!r}: unknown kind {kind!r}; known kinds: {', '.join(engine_kinds())}")
    target = _KINDS[kind]
    if isinstance(target, str):
        module, attr = target.split(":")
        target = getattr(importlib.import_module(module), attr)
    return target(name, **options)
