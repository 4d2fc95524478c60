"""The completions API's JSON on the remote LLM engine's side (engines.openai.llm): a request's body, a
decode's structured output as a request field, and the token counts and logprobs of an answer or a
streamed chunk, read from plain dicts (the engine reads answers as JSON, not as the SDK's models)."""

from __future__ import annotations

from typing import Any

from engines.openai.capabilities import VLLM_NEUTRAL, Capabilities

# OpenAI's own fields at their neutral values (the vLLM-only ones are in VLLM_NEUTRAL)
NEUTRAL_SAMPLING = {"top_p": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "n": 1}


def completion_body(
    name: str,
    model: str,
    max_model_len: int | None,
    caps: Capabilities,
    prefill: bool,
    req: dict[str, Any],
    ids: list[int],
) -> dict[str, Any]:
    """The JSON body of one request of engine `name` to /v1/completions (vLLM's extra fields beside
    OpenAI's, when the server takes them: `caps`). A request's cache_salt is sent only then."""
    max_tokens = 1 if prefill else req["max_tokens"]
    if max_model_len and len(ids) + max_tokens > max_model_len:
        raise ValueError(
            f"engine {name!r}: prompt of {len(ids)} tokens + max_tokens {max_tokens} exceeds "
            f"max_model_len {max_model_len}; send a shorter prompt or serve a longer context"
        )
    body: dict[str, Any] = {
        "model": model,
        "prompt": ids,
        "max_tokens": max_tokens,
        **NEUTRAL_SAMPLING,
        "temperature": 0.0 if prefill else req["temperature"],
    }
    if not prefill:
        body.update(
            top_p=req["top_p"],
            presence_penalty=req["presence_penalty"],
            frequency_penalty=req["frequency_penalty"],
        )
        if req["logprobs"] is not None:
            body["logprobs"] = req["logprobs"]
    if req["stop"] and not prefill:
        body["stop"] = req["stop"]
    if req["seed"] is not None:
        body["seed"] = req["seed"]
    if not prefill:
        body.update(response_format(req))
    if caps.vllm_fields:
        body.update(VLLM_NEUTRAL, ignore_eos=req["ignore_eos"] and not prefill)
        if req["cache_salt"]:
            body["cache_salt"] = req["cache_salt"]
    if caps.token_ids:
        body["return_token_ids"] = True
    if caps.priority and req["priority"]:
        body["priority"] = req["priority"]
    if not prefill:
        body.update(stream=True, stream_options={"include_usage": True})
    return body


def response_format(req: dict[str, Any]) -> dict[str, Any]:
    """A decode's structured output as vLLM's completions API takes it (OpenAI's chat field, sent
    in the body's extras: the SDK's completions call has no such argument)."""
    if req["json_schema"] is not None:
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": req["json_schema"]},
            }
        }
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
        out.append(
            {
                **_token(token, logps[k] if k < len(logps) else None),
                "top_logprobs": [_token(t, lp) for t, lp in ranked],
            }
        )
    return out


def _token(text: str, logprob: float | None) -> dict[str, Any]:
    return {
        "token": text,
        "logprob": float(logprob if logprob is not None else -9999.0),  # OpenAI's "unlikely"
        "bytes": list(text.encode()),
    }


def counts(n_prompt: int, usage: dict[str, Any] | None) -> dict[str, Any]:
    """Prompt and cached tokens from an answer's `usage` JSON (None or partial on some servers)."""
    usage = usage or {}
    details = usage.get("prompt_tokens_details") or {}
    return {
        "num_prompt_tokens": int(usage.get("prompt_tokens") or n_prompt),
        "num_cached_tokens": int(details.get("cached_tokens") or 0),
    }
