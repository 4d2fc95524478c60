"""What one vLLM request returns to teola: its token counts (prompt, cached; "aborted" when it was
stopped inside vLLM; the KV connector's fields) and, for a decode, its text, items and token ids."""

from __future__ import annotations

from typing import Any

from engines.llm_text.batch_stream import Decoded
from engines.vllm import kv_swap as vllm_kv_swap


def executor_seconds(output: Any) -> float | None:
    """The seconds a vLLM request has spent in the engine's running batch up to `output` (one of its
    `RequestOutput`s): from its first scheduling to its latest token, read from `output.metrics`
    (vLLM's `RequestStateStats`, kept because the adapter registers stat loggers). None where vLLM
    keeps no such stats, or where vLLM preempted the request itself: that span would also hold the
    time it sat preempted (the caller then charges wall time, the named fallback
    `wall-time-service`, docs/program_scheduling.md)."""
    stats = getattr(output, "metrics", None)
    scheduled = float(getattr(stats, "scheduled_ts", 0.0) or 0.0)
    latest = float(getattr(stats, "last_token_ts", 0.0) or 0.0)
    preempted = int(getattr(stats, "num_preemptions", 0) or 0)
    if scheduled <= 0.0 or latest < scheduled or preempted:
        return None
    return latest - scheduled


def queued_seconds(output: Any) -> float | None:
    """The seconds a vLLM request waited in vLLM's own queue before its first scheduling, or None."""
    stats = getattr(output, "metrics", None)
    queued = float(getattr(stats, "queued_ts", 0.0) or 0.0)
    scheduled = float(getattr(stats, "scheduled_ts", 0.0) or 0.0)
    return scheduled - queued if 0.0 < queued <= scheduled else None


def call_counts(last: Any, prompt_tokens: int) -> dict[str, Any]:
    """The counts of a request whose last vLLM output is `last` and whose prompt had `prompt_tokens`,
    with its seconds in vLLM's queue ("queued_s") and running batch ("executor_s") where known."""
    counts: dict[str, Any] = {
        "num_prompt_tokens": prompt_tokens,
        "num_cached_tokens": int(last.num_cached_tokens or 0),
    }
    for key, seconds in (("queued_s", queued_seconds(last)), ("executor_s", executor_seconds(last))):
        if seconds is not None:
            counts[key] = seconds
    if last.outputs and last.outputs[0].finish_reason == "abort":
        counts["aborted"] = True
    counts.update(vllm_kv_swap.result_fields(last))
    return counts


async def decode_result(
    out: Decoded, last: Any, counts: dict[str, Any], logprobs: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """A decode's result: what `out` accumulated, its `counts`, and `logprobs` when they were asked for."""
    result = {
        "text": "".join(out.text),
        "items": await out.items(),
        **counts,
        "num_output_tokens": out.tokens,
        "output_token_ids": out.token_ids,
        # None when decoding was cut short because every item asked for was out
        "finish_reason": (last.outputs[0].finish_reason if last.outputs else None) or "stop",
    }
    if logprobs is not None:
        result["logprobs"] = logprobs
    return result
