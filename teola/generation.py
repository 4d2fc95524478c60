"""LLM generation settings every call starts from (a node's config, a `Program.call` keyword or a
request overrides them). The one place these defaults live."""
from __future__ import annotations

GEN_KEYS = ("max_tokens", "temperature", "stop")
DEFAULT_GEN: dict[str, object] = {"max_tokens": 128, "temperature": 0.0, "stop": None}
