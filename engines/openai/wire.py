"""The completions API's JSON on the remote LLM engine's side (engines.openai.llm): a decode's structured
output as a request field, and the token counts and logprobs of an answer or a streamed chunk, read
from plain dicts (the engine reads answers as JSON, not as the SDK's models)."""
from __future__ import annotations

from typing import Any


def response_format(req: dict[str, Any]) -> dict[str, Any]:
    """A decode's structured output as vLLM's completions API takes it (OpenAI's chat field, sent
    in the body's extras: the SDK's completions call has no such argument)."""
    if req["json_schema"] is not None:
        return {"response_format": {"type": "json_schema", "json_schema": {"name": "output",
                                                                           "schema": req["json_schema"]}}}
    return {"response_format": {"type": "json_object"}} if req["json_object"] else {}


def completion_logprobs(logprobs: dict[str, Any], top: int, special: frozenset[str]) -> list[dict[str, Any]]:
    """A completions API chunk's logprobs (its JSON: parallel lists of tokens, logprobs and
    top-logprob dicts) in the per-token shape of engines/protocol.py; `special` tokens (the end of
    turn), which the text leaves out, are left out too."""
    out = []
    tops, logps = logprobs.get("top_logprobs") or [], logprobs.get("token_logprobs") or []
    for k, token in enumerate(logprobs.get("tokens") or ()):
        if token in special:
            continue
        alternatives = tops[k] if k < len(tops) else None
        ranked = sorted((alternatives or {}).items(), key=lambda kv: -kv[1])[:top]
        out.append({**_token(token, logps[k] if k < len(logps) else None),
                    "top_logprobs": [_token(t, lp) for t, lp in ranked]})
    return out


def _token(text: str, logprob: float | None) -> dict[str, Any]:
    return {"token": text, "logprob": float(logprob if logprob is not None else -9999.0),  # OpenAI's "unlikely"
            "bytes": list(text.encode())}


def counts(n_prompt: int, usage: dict[str, Any] | None) -> dict[str, Any]:
    """Prompt and cached tokens from an answer's `usage` JSON (None or partial on some servers)."""
    usage = usage or {}
    details = usage.get("prompt_tokens_details") or {}
    return {"num_prompt_tokens": int(usage.get("prompt_tokens") or n_prompt),
            "num_cached_tokens": int(details.get("cached_tokens") or 0)}
