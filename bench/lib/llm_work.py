"""The LLM work a query did, read from its trace: one entry per call, however the runtime ran it."""

from __future__ import annotations

from typing import Any


def llm_calls(trace: list[dict[str, Any]]) -> list[list[int]]:
    """[prompt tokens, output tokens] of each LLM call of a query, sorted (a split decode's items and
    a call's prefill are one call: the call's decode reports its whole prompt)."""
    calls: dict[str, list[int]] = {}
    for t in trace:
        if t.get("op") in ("decoding", "partial_decoding") and t.get("status", "ok") == "ok":
            c = calls.setdefault(t["primitive"].split("[")[0], [0, 0])
            c[0] = max(c[0], int(t.get("num_prompt_tokens") or 0))
            c[1] = max(c[1], int(t.get("num_output_tokens") or 0))
    return sorted(calls.values())
