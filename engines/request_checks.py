"""Checks of request fields every engine that takes text needs: a searching request's query text and
top_k, text free of NUL characters (PostgreSQL text cannot store them; no engine wants them), and an
LLM request that fits its model's context window."""

from __future__ import annotations

from typing import Any

from engines.requests import default


class ContextTooLong(ValueError):
    """An LLM request's prompt plus its max_tokens do not fit in the model's context window (the
    OpenAI door answers it as OpenAI does: 400 `context_length_exceeded`)."""


def check_context(engine: str, n_prompt: int, max_tokens: int, window: int) -> None:
    """Raise ContextTooLong naming the engine and the numbers when `n_prompt + max_tokens > window`."""
    if n_prompt + max_tokens > window:
        raise ContextTooLong(
            f"engine {engine!r}: prompt of {n_prompt} tokens + max_tokens {max_tokens} exceeds "
            f"the model's context window of {window} tokens (max_model_len); raise the engine "
            f"option max_model_len or send a shorter prompt"
        )


def search_request(req: Any, key: str, where: str) -> tuple[str, int]:
    """A searching request's text field `key` (no NUL) and its top_k (default: engines.requests),
    validated."""
    if not isinstance(req, dict):
        raise TypeError(f"{where}: expected a dict, got {type(req).__name__}")
    value, k = req.get(key), default(req, "top_k")
    if not isinstance(value, str):
        raise ValueError(f"{where}: {key!r} must be a str, got {type(value).__name__}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"{where}: 'top_k' must be a positive int, got {k!r}")
    check_no_nul(value, f"{where}: {key}")
    return value, k


def check_no_nul(value: Any, what: str) -> None:
    """Raise ValueError if a str (or any str inside dict/list) holds a NUL character."""
    if isinstance(value, str):
        pos = value.find("\x00")
        if pos >= 0:
            raise ValueError(
                f"{what} contains a NUL character (\\x00) at offset {pos}; PostgreSQL text cannot store "
                f"it: remove or replace NUL characters before ingestion"
            )
    elif isinstance(value, dict):
        for k, v in value.items():
            check_no_nul(k, f"{what} key")
            check_no_nul(v, f"{what}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_no_nul(v, f"{what}[{i}]")
