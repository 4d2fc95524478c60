"""How many tokens an LLM request will hold, estimated before the engine tokenizes it (4 characters a
token): what an LLM engine's scheduler charges each entry against its instances' token budget (its
whole output budget up front, or, for preemptible calls, what it holds as it decodes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teola.scheduling.preemption import held_tokens


def estimate_prompt_tokens(request: Mapping[str, Any]) -> int:
    """Rough prompt token count of an LLM request (4 characters a token), with what a call that
    continues after a pause carries ("continuation": token-id lists count as their length)."""
    chars = sum(len(t) for _, t in request["parts"])
    ids = 0
    for seg in request.get("continuation") or ():
        if isinstance(seg, str):
            chars += len(seg)
        else:
            ids += len(seg)
    return chars // 4 + 1 + ids


def estimate_tokens(request: Mapping[str, Any]) -> int:
    """Rough token count of an LLM request (4 characters a token) plus its output budget."""
    out = request.get("max_tokens") or 0
    return estimate_prompt_tokens(request) + (out if request.get("complete") and out > 1 else 0)


def estimate_held_tokens(request: Mapping[str, Any], decoded: int = 0) -> int:
    """What a preemptible call's request holds of the KV cache after decoding `decoded` tokens in its
    current run: its prompt with the token ids it resumes from (its wire request's "resume_ids"),
    those tokens, and one block of headroom (teola.scheduling.preemption.held_tokens)."""
    return held_tokens(estimate_prompt_tokens(request) + len(request.get("resume_ids") or ()), decoded)
