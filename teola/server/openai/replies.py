"""teola's call results written back in OpenAI's shapes (teola.server.openai.door and .stream): a
whole response, the chunks of a streamed one, and their finish reasons, usage and logprobs."""

from __future__ import annotations

import json
import time
from typing import Any


def choice_logprobs(
    chat: bool, tokens: list[dict[str, Any]] | None, offset: int = 0
) -> dict[str, Any] | None:
    """A choice's "logprobs" from the engine's per-token logprobs (engines/protocol.py): chat's
    {"content": [...], "refusal": None}; a completion's parallel lists (tokens, token_logprobs,
    top_logprobs as {token: logprob}, text_offset from `offset` characters into the answer)."""
    if tokens is None:
        return None
    if chat:
        return {"content": tokens, "refusal": None}
    offsets, at = [], offset
    for t in tokens:
        offsets.append(at)
        at += len(t["token"])
    return {
        "tokens": [t["token"] for t in tokens],
        "token_logprobs": [t["logprob"] for t in tokens],
        "top_logprobs": [{a["token"]: a["logprob"] for a in t["top_logprobs"]} for t in tokens],
        "text_offset": offsets,
    }


# vLLM's reasons, as OpenAI names them ("abort": the call was cut short, e.g. its client left)
FINISH_REASONS = {"stop": "stop", "length": "length", "abort": "stop", "error": "stop"}


def finish_reason(result: dict[str, Any], max_tokens: int, tool_calls: bool = False) -> str:
    """OpenAI's finish_reason of a call: "tool_calls" when the answer is tool calls, else the
    engine's own reason; an engine that reports none (the simulated one, an older remote adapter)
    gets "length" when it decoded max_tokens tokens and "stop" otherwise."""
    if tool_calls:
        return "tool_calls"
    reason = result.get("finish_reason")
    if reason is None:
        return "length" if result.get("num_output_tokens", 0) >= max_tokens else "stop"
    return FINISH_REASONS.get(str(reason), "stop")


def usage(result: dict[str, Any]) -> dict[str, Any]:
    prompt, out = int(result.get("num_prompt_tokens", 0)), int(result.get("num_output_tokens", 0))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": out,
        "total_tokens": prompt + out,
        "prompt_tokens_details": {"cached_tokens": int(result.get("num_cached_tokens", 0))},
    }


def response(
    chat: bool,
    call_id: str,
    model: str,
    result: dict[str, Any],
    max_tokens: int,
    tools: tuple[str, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The non-streaming answer of one call; `tools`: (its text outside tool calls, its tool calls)
    when the request offered tools (teola.server.openai.tools.parse_tool_calls)."""
    text = result.get("text", "")
    outside, calls = tools if tools is not None else (None, [])
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": finish_reason(result, max_tokens, bool(calls)),
        "logprobs": choice_logprobs(chat, result.get("logprobs")),
    }
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
        if calls:
            choice["message"].update(content=outside or None, tool_calls=calls)
    else:
        choice["text"] = text
    return {
        "id": call_id,
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage(result),
    }


def chunk(
    chat: bool,
    call_id: str,
    model: str,
    text: str | None = None,
    finish: str | None = None,
    role: bool = False,
    use: dict[str, Any] | None = None,
    calls: list[dict[str, Any]] | None = None,
    logprobs: dict[str, Any] | None = None,
) -> str:
    """One server-sent event of a streamed answer (OpenAI's chunk format); `calls`: tool calls,
    each sent whole in one delta (with its index, id, name and arguments); `logprobs`: the
    choice's logprobs (`choice_logprobs`)."""
    choices: list[dict[str, Any]] = []
    if use is None:
        if chat:
            delta: dict[str, Any] = {"role": "assistant"} if role else {}
            if text is not None:
                delta["content"] = text
            if calls:
                delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(calls)]
            choices = [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": logprobs}]
        else:
            choices = [{"index": 0, "text": text or "", "finish_reason": finish, "logprobs": logprobs}]
    body: dict[str, Any] = {
        "id": call_id,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
    }
    if use is not None:
        body["usage"] = use
    return f"data: {json.dumps(body)}\n\n"
