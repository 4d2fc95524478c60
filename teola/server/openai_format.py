"""The OpenAI API shapes of the front door (teola.server.openai_door): a chat or completion request
read into teola's LLM request parts and generation options, and teola's call results written back
as OpenAI responses and stream chunks."""
from __future__ import annotations

import json
import time
from typing import Any

from teola.server.errors import ApiError

GEN_FIELDS = ("max_tokens", "temperature", "stop", "seed")
DEFAULT_MAX_TOKENS = 256


def _invalid(detail: str) -> ApiError:
    return ApiError(422, "invalid_request", detail)


def _text(content: Any, where: str) -> str:
    """A message's content: a string, or a list of text parts (other part types are refused)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    if content is None:
        return ""
    raise _invalid(f"{where}: content must be a string or a list of text parts, got {content!r:.80}")


def chat_parts(messages: Any) -> list[list[str]]:
    """OpenAI chat messages -> prompt parts. A leading system (or developer) message becomes the
    system part; one user message is sent as it is; a longer conversation is flattened into one
    user turn of "role: content" paragraphs (teola's engines render one system + one user message)."""
    if not isinstance(messages, list) or not messages:
        raise _invalid("messages must be a non-empty list of {role, content} objects")
    parts: list[list[str]] = []
    rest = list(messages)
    for i, m in enumerate(rest):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _invalid(f"messages[{i}] must be an object with a string 'role', got {m!r:.80}")
    if rest[0]["role"] in ("system", "developer"):
        parts.append(["system", _text(rest.pop(0).get("content"), "messages[0]")])
    if len(rest) == 1 and rest[0]["role"] == "user":
        return parts + [["user", _text(rest[0].get("content"), "messages[-1]")]]
    if not rest:
        raise _invalid("messages hold only a system message; add a user message")
    for i, m in enumerate(rest):
        parts.append([m["role"], f"{m['role']}: {_text(m.get('content'), f'messages[{i}]')}"])
    return parts


def completion_parts(prompt: Any) -> list[list[str]]:
    """A completion prompt -> prompt parts (sent as one user message through the chat template)."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise _invalid("prompt must be one non-empty string (lists of prompts and token ids are not served)")
    return [["user", prompt]]


def generation(body: dict[str, Any]) -> dict[str, Any]:
    """The generation options of a request (OpenAI names), validated; 422 naming a bad field."""
    if body.get("n", 1) != 1:
        raise _invalid("only n=1 is served")
    if body.get("tools"):
        raise _invalid("tool definitions are not served: describe tools in the prompt and parse the answer")
    max_tokens = next((body[k] for k in ("max_completion_tokens", "max_tokens") if body.get(k) is not None),
                      DEFAULT_MAX_TOKENS)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise _invalid(f"max_tokens must be a positive int, got {max_tokens!r}")
    temperature = body.get("temperature", 1.0)
    temperature = 1.0 if temperature is None else temperature
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2:
        raise _invalid(f"temperature must be a number in [0, 2], got {temperature!r}")
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else stop
    if stop is not None and (not isinstance(stop, list) or not all(isinstance(s, str) for s in stop)):
        raise _invalid(f"stop must be a string or a list of strings, got {stop!r:.80}")
    gen = {"max_tokens": max_tokens, "temperature": float(temperature), "stop": stop or None}
    if body.get("ignore_eos"):  # vLLM's extension: decode exactly max_tokens tokens
        gen["ignore_eos"] = True
    if body.get("seed") is not None:
        if isinstance(body["seed"], bool) or not isinstance(body["seed"], int):
            raise _invalid(f"seed must be an int, got {body['seed']!r}")
        gen["seed"] = body["seed"]
    return gen


def finish_reason(result: dict[str, Any], max_tokens: int) -> str:
    return "length" if result.get("num_output_tokens", 0) >= max_tokens else "stop"


def usage(result: dict[str, Any]) -> dict[str, Any]:
    prompt, out = int(result.get("num_prompt_tokens", 0)), int(result.get("num_output_tokens", 0))
    return {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out,
            "prompt_tokens_details": {"cached_tokens": int(result.get("num_cached_tokens", 0))}}


def response(chat: bool, call_id: str, model: str, result: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """The non-streaming answer of one call."""
    text = result.get("text", "")
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish_reason(result, max_tokens), "logprobs": None}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {"id": call_id, "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
            "model": model, "choices": [choice], "usage": usage(result)}


def chunk(chat: bool, call_id: str, model: str, text: str | None = None, finish: str | None = None,
          role: bool = False, use: dict[str, Any] | None = None) -> str:
    """One server-sent event of a streamed answer (OpenAI's chunk format)."""
    choices: list[dict[str, Any]] = []
    if use is None:
        if chat:
            delta: dict[str, Any] = {"role": "assistant"} if role else {}
            if text is not None:
                delta["content"] = text
            choices = [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
        else:
            choices = [{"index": 0, "text": text or "", "finish_reason": finish, "logprobs": None}]
    body = {"id": call_id, "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": choices}
    if use is not None:
        body["usage"] = use
    return f"data: {json.dumps(body)}\n\n"
