"""What one vLLM request returns to teola: its token counts (prompt, cached; "aborted" when it was
stopped inside vLLM; the KV connector's fields) and, for a decode, its text, items and token ids."""

from __future__ import annotations

from typing import Any

from engines.llm_text.batch_stream import Decoded
from engines.vllm import kv_swap as vllm_kv_swap


def call_counts(last: Any, prompt_tokens: int) -> dict[str, Any]:
    """The counts of a request whose last vLLM output is `last` and whose prompt had `prompt_tokens`."""
    counts = {"num_prompt_tokens": prompt_tokens, "num_cached_tokens": int(last.num_cached_tokens or 0)}
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
