"""The OpenAI API shapes of the front door (teola.server.openai.door): a chat or completion request
read into teola's LLM request (its conversation as "messages" for the model's chat template, a
completion prompt as "raw_prompt", plus flattened parts for engines that render parts only) and
generation options. teola's call results are written back as OpenAI responses and stream chunks by
teola.server.openai.replies.

Every field of a request is honoured or refused with a 400 naming it (`check_fields`): nothing is
dropped silently. Honoured: model, messages / prompt, stream, stream_options.include_usage,
max_tokens / max_completion_tokens, temperature, top_p, stop, seed, n=1, presence_penalty,
frequency_penalty, user (the program id), tools, tool_choice ("auto" or "none"),
parallel_tool_calls, response_format ("text"; "json_object" and "json_schema": structured outputs on
engines that declare them), logprobs and top_logprobs (a completion's logprobs: an int; on engines
that declare them), metadata, store=false, service_tier, and vLLM's ignore_eos. Refused: every
other field, and n > 1, echo, best_of > 1 and suffix."""

from __future__ import annotations

import json
from typing import Any

from teola.server.errors import ApiError

DEFAULT_MAX_TOKENS = 256
MAX_STOP = 4  # OpenAI's own limit on stop sequences
MAX_STOP_CHARS = 256
COMMON_FIELDS = frozenset(
    {
        "model",
        "stream",
        "stream_options",
        "max_tokens",
        "temperature",
        "top_p",
        "stop",
        "seed",
        "n",
        "presence_penalty",
        "frequency_penalty",
        "user",
        "ignore_eos",
        "logprobs",
        "metadata",
        "store",
        "service_tier",
    }
)
CHAT_FIELDS = COMMON_FIELDS | {
    "messages",
    "max_completion_tokens",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "top_logprobs",
}
COMPLETION_FIELDS = COMMON_FIELDS | {"prompt", "echo", "best_of", "suffix"}
# fields honoured only at their neutral value (anything else is refused, naming the field)
NEUTRAL = {"n": (1,), "echo": (False,), "best_of": (1,), "store": (False,)}
MAX_TOP_LOGPROBS = 20
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


def _invalid(detail: str, param: str | None = None, code: str = "invalid_value") -> ApiError:
    return ApiError(400, code, detail, param=param)


def check_fields(body: dict[str, Any], chat: bool) -> None:
    """400 naming the first field the door does not serve (unknown, or set to a value it cannot
    honour); fields set to null count as absent."""
    known = CHAT_FIELDS if chat else COMPLETION_FIELDS
    unknown = sorted(k for k, v in body.items() if k not in known and v is not None)
    if unknown:
        raise _invalid(
            f"unsupported parameter(s) {', '.join(repr(k) for k in unknown)}: teola's door serves "
            f"{', '.join(sorted(known))}",
            unknown[0],
            "unsupported_parameter",
        )
    for name, values in NEUTRAL.items():
        if body.get(name) is not None and name in known and body[name] not in values:
            raise _invalid(
                f"{name}={body[name]!r:.40} is not served (only {values[0]!r})", name, "unsupported_value"
            )
    if not chat and body.get("suffix"):
        raise _invalid("suffix (insertion) is not served", "suffix", "unsupported_value")
    fmt = body.get("response_format")
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if fmt is not None and kind not in ("text", "json_object", "json_schema"):
        raise _invalid(
            f"response_format {fmt!r:.80} is not served: use {{'type': 'text'}}, {{'type': "
            "'json_object'}} or {'type': 'json_schema', 'json_schema': {'name', 'schema'}}",
            "response_format",
            "unsupported_value",
        )


def _text(content: Any, where: str) -> str:
    """A message's content: a string, or a list of text parts (other part types are refused)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    if content is None:
        return ""
    raise _invalid(
        f"{where}: content must be a string or a list of text parts, got {content!r:.80}", f"{where}.content"
    )


def chat_messages(messages: Any) -> list[dict[str, Any]]:
    """OpenAI chat messages, checked and normalized for the engine's chat template
    (engines/llm_text/chat_messages.py): developer -> system, content as text, an assistant's
    tool_calls with their arguments as objects, a tool result with its tool_call_id."""
    if not isinstance(messages, list) or not messages:
        raise _invalid("messages must be a non-empty list of {role, content} objects", "messages")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise _invalid(
                f"{where} must be an object with a role of {', '.join(ROLES)}, got {m!r:.80}", where
            )
        msg: dict[str, Any] = {"role": ROLES[m["role"]], "content": _text(m.get("content"), where)}
        if msg["role"] == "assistant" and m.get("tool_calls"):
            if not isinstance(m["tool_calls"], list):
                raise _invalid(
                    f"{where}.tool_calls must be a list of tool calls, got {m['tool_calls']!r:.80}",
                    f"{where}.tool_calls",
                )
            msg["tool_calls"] = [
                _earlier_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(m["tool_calls"])
            ]
        if msg["role"] == "tool":
            if not isinstance(m.get("tool_call_id"), str):
                raise _invalid(
                    f"{where}: a tool message needs the tool_call_id it answers", f"{where}.tool_call_id"
                )
            msg["tool_call_id"] = m["tool_call_id"]
            if isinstance(m.get("name"), str):
                msg["name"] = m["name"]
        out.append(msg)
    if all(m["role"] == "system" for m in out):
        raise _invalid("messages hold only system messages; add a user message", "messages")
    return out


def _earlier_call(call: Any, where: str) -> dict[str, Any]:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise _invalid(
            f"{where} must be {{'id', 'type': 'function', 'function': {{'name', 'arguments'}}}}", where
        )
    args = fn.get("arguments") or "{}"
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass  # a template writes it back as the text it was
    return {
        "id": str(call.get("id", "")),
        "type": "function",
        "function": {"name": fn["name"], "arguments": args},
    }


def chat_parts(messages: list[dict[str, Any]]) -> list[list[str]]:
    """Normalized chat messages (`chat_messages`) -> prompt parts, for engines that render parts
    rather than "messages": a leading system message becomes the system part; one user message
    is sent as it is; a longer conversation is flattened into "role: content" paragraphs."""
    rest = list(messages)
    parts: list[list[str]] = []
    if rest[0]["role"] == "system":
        parts.append(["system", rest.pop(0)["content"]])
    if len(rest) == 1 and rest[0]["role"] == "user":
        return parts + [["user", rest[0]["content"]]]
    for m in rest:
        calls = "".join(
            json.dumps({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
            for c in m.get("tool_calls", ())
        )
        parts.append([m["role"], f"{m['role']}: {m['content']}{calls}"])
    return parts


def completion_prompt(prompt: Any) -> str:
    """A completion's prompt text, sent to the model raw (no chat template: request "raw_prompt";
    engines that render parts only get it as one user part)."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise _invalid(
            "prompt must be one non-empty string (lists of prompts and token ids are not served)", "prompt"
        )
    return prompt


def generation(body: dict[str, Any]) -> dict[str, Any]:
    """The generation options of a request (OpenAI names), validated; 400 naming a bad field."""
    max_tokens = next(
        (body[k] for k in ("max_completion_tokens", "max_tokens") if body.get(k) is not None),
        DEFAULT_MAX_TOKENS,
    )
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise _invalid(
            f"max_tokens must be a positive int, got {max_tokens!r}",
            "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens",
        )
    temperature = body.get("temperature", 1.0)
    temperature = 1.0 if temperature is None else temperature
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not 0 <= temperature <= 2
    ):
        raise _invalid(f"temperature must be a number in [0, 2], got {temperature!r}", "temperature")
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else stop
    if stop is not None and (not isinstance(stop, list) or not all(isinstance(s, str) for s in stop)):
        raise _invalid(f"stop must be a string or a list of strings, got {stop!r:.80}", "stop")
    if stop is not None and (len(stop) > MAX_STOP or any(len(s) > MAX_STOP_CHARS for s in stop)):
        raise _invalid(
            f"stop holds at most {MAX_STOP} sequences of at most {MAX_STOP_CHARS} characters each, got "
            f"{len(stop)} of up to {max(map(len, stop))}",
            "stop",
        )
    gen = {"max_tokens": max_tokens, "temperature": float(temperature), "stop": stop or None}
    if body.get("ignore_eos"):  # vLLM's extension: decode exactly max_tokens tokens
        gen["ignore_eos"] = True
    gen.update(_sampling(body))
    top = logprobs(body, "messages" in body)
    if top is not None:
        gen["logprobs"] = top
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_object":
        gen["json_object"] = True
    elif fmt.get("type") == "json_schema":
        gen["json_schema"] = response_schema(fmt)
    return gen


def _sampling(body: dict[str, Any]) -> dict[str, Any]:
    """A request's seed, top_p and penalties, those it sets, validated."""
    options: dict[str, Any] = {}
    if body.get("seed") is not None:
        if isinstance(body["seed"], bool) or not isinstance(body["seed"], int):
            raise _invalid(f"seed must be an int, got {body['seed']!r}", "seed")
        options["seed"] = body["seed"]
    for name, low, high in (
        ("top_p", 0.0, 1.0),
        ("presence_penalty", -2.0, 2.0),
        ("frequency_penalty", -2.0, 2.0),
    ):
        value = body.get(name)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not low <= value <= high
            or (name == "top_p" and value == 0)
        ):
            raise _invalid(
                f"{name} must be a number in {'(0' if name == 'top_p' else f'[{low:g}'}, {high:g}], "
                f"got {value!r}",
                name,
            )
        options[name] = float(value)
    return options


def logprobs(body: dict[str, Any], chat: bool) -> int | None:
    """How many top alternatives to return with each output token's logprob, or None for no
    logprobs: chat's logprobs (bool) and top_logprobs (0-20), a completion's logprobs (0-20)."""
    value = body.get("logprobs")
    if chat:
        top = body.get("top_logprobs")
        if value is not None and not isinstance(value, bool):
            raise _invalid(f"logprobs must be a boolean, got {value!r:.40}", "logprobs")
        if top is not None and (
            isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_TOP_LOGPROBS
        ):
            raise _invalid(
                f"top_logprobs must be an int in [0, {MAX_TOP_LOGPROBS}], got {top!r:.40}", "top_logprobs"
            )
        if top is not None and not value:
            raise _invalid("top_logprobs needs logprobs: true", "top_logprobs")
        return (top or 0) if value else None
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOP_LOGPROBS
    ):
        raise _invalid(
            f"logprobs must be an int in [0, {MAX_TOP_LOGPROBS}] (top alternatives per token), got "
            f"{value!r:.40}",
            "logprobs",
        )
    return value


def response_schema(fmt: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of a response_format {"type": "json_schema", "json_schema": {"name", "schema",
    "strict"}}; the output is decoded under it whatever "strict" says."""
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        raise _invalid(
            f"response_format.json_schema must be {{'name': ..., 'schema': {{a JSON schema object}}}}, got "
            f"{spec!r:.80}",
            "response_format",
        )
    return schema


def constrained(gen: dict[str, Any]) -> bool:
    """Whether a call's output is constrained (json_object or json_schema: structured outputs)."""
    return bool(gen.get("json_object")) or gen.get("json_schema") is not None
