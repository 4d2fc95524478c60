"""`Engine(name, kind="openai", url=..., model=...)`: an engine behind an OpenAI-compatible HTTP API.

The option `api` picks the adapter: "completions" (default: an LLM served by `vllm serve` or any
server with the OpenAI completions API, engines.openai.llm) or "embeddings" (engines.openai.embedding).
`urls=[...]` instead of `url` starts one instance per server (`Engine.instance_options`)."""

from __future__ import annotations

from typing import Any

from engines.openai.embedding import OpenAIEmbeddingEngine
from engines.openai.llm import OpenAILLMEngine
from engines.protocol import EngineBackend, EngineProfile

APIS = {"completions": OpenAILLMEngine, "embeddings": OpenAIEmbeddingEngine}


def _adapter_class(api: Any) -> type:
    if api not in APIS:
        raise ValueError(f"option api must be one of {', '.join(APIS)} for kind 'openai', got {api!r}")
    return APIS[api]


def openai_engine(name: str, api: str = "completions", **options: Any) -> EngineBackend:
    """Build the adapter for `api` ("completions" or "embeddings") with the other options."""
    return _adapter_class(api)(name, **options)


def defaults_for(options: dict[str, Any]) -> tuple[frozenset[str], EngineProfile]:
    """The ops and default profile of the adapter these options select (for `Engine` specs)."""
    cls = _adapter_class(options.get("api", "completions"))
    return cls.ops, cls.default_profile


def continuous_for(options: dict[str, Any]) -> bool:
    """Whether the adapter these options select batches continuously (the LLM one does)."""
    return getattr(_adapter_class(options.get("api", "completions")), "continuous", False) is True


openai_engine.ops = OpenAILLMEngine.ops  # type: ignore[attr-defined]
openai_engine.default_profile = OpenAILLMEngine.default_profile  # type: ignore[attr-defined]
openai_engine.defaults_for = defaults_for  # type: ignore[attr-defined]
openai_engine.continuous_for = continuous_for  # type: ignore[attr-defined]
