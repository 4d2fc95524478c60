"""What a request asks of vLLM's sampler (`SamplingParams`), and what comes back beyond text: structured
outputs (a request's "json_schema" / "json_object" as vLLM's StructuredOutputsParams) and per-token
logprobs (vLLM's `SamplingParams(logprobs=k)` output in the shape of engines/protocol.py)."""

from __future__ import annotations

from typing import Any


def sampling_params(prefill: bool, req: dict[str, Any], seed: int | None, extra_args: Any) -> Any:
    """vLLM's SamplingParams of a checked request: a prefill's one greedy token (only fills the
    prefix cache), or a decode streamed in deltas with its sampling fields."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

    if prefill:
        return SamplingParams(
            max_tokens=1, temperature=0.0, seed=seed, output_kind=RequestOutputKind.FINAL_ONLY
        )
    return SamplingParams(
        max_tokens=req["max_tokens"],
        temperature=req["temperature"],
        stop=req["stop"],
        ignore_eos=req["ignore_eos"],
        seed=seed,
        output_kind=RequestOutputKind.DELTA,
        top_p=req["top_p"],
        presence_penalty=req["presence_penalty"],
        frequency_penalty=req["frequency_penalty"],
        structured_outputs=structured_outputs(req, StructuredOutputsParams),
        logprobs=req["logprobs"],
        extra_args=extra_args,
    )


def structured_outputs(req: dict[str, Any], params: Any) -> Any:
    """vLLM's structured-outputs parameters of a checked decode request, or None."""
    if req["json_schema"] is not None:
        return params(json=req["json_schema"])
    return params(json_object=True) if req["json_object"] else None


def token_logprobs(output: Any, top: int, special: frozenset[int]) -> list[dict[str, Any]]:
    """The logprobs of the tokens one vLLM output delta added, in OpenAI's shape: per token its text,
    logprob, UTF-8 bytes and its `top` most likely alternatives; `special` tokens (the end of turn),
    which the text leaves out, are left out too."""
    out = []
    for token_id, entries in zip(output.token_ids, output.logprobs or ()):
        if token_id in special:
            continue
        chosen = entries[token_id]
        ranked = sorted(
            (e for e in entries.values() if e.rank is not None and e.rank <= top), key=lambda e: e.rank
        )
        out.append({**_token(chosen), "top_logprobs": [_token(e) for e in ranked]})
    return out


def _token(entry: Any) -> dict[str, Any]:
    text = entry.decoded_token or ""
    return {"token": text, "logprob": float(entry.logprob), "bytes": list(text.encode())}
