"""A whole chat conversation as an LLM request carries it (the request fields "messages" and
"tools", sent by the OpenAI-compatible door), checked and rendered with the model's chat template.

Messages are OpenAI's, normalized: ``{"role": "system" | "user" | "assistant" | "tool", "content":
str}``; an assistant message may carry ``tool_calls`` (``[{"id", "type": "function", "function":
{"name", "arguments": dict}}]``) and a tool message ``tool_call_id`` (and ``name``). Tools are
OpenAI's function definitions (``{"type": "function", "function": {"name", "description",
"parameters"}}``), the JSON-schema form Hugging Face chat templates take.

When the template renders tools itself (its source uses ``tools``), messages and tools go to it as
they are, and the model writes calls in its own syntax. Otherwise (`fallback_messages`) the tool
definitions and `TOOL_FORMAT` are appended to the system message, earlier calls are written back
as ``<tool>{"name": ..., "arguments": {...}}</tool>`` (teola's tool syntax,
teola.compile.tool_syntax) and tool results as a user turn ``<result>...</result>``.
"""

from __future__ import annotations

import json
from typing import Any

TOOL_OPEN, TOOL_CLOSE = "<tool>", "</tool>"
RESULT_OPEN, RESULT_CLOSE = "<result>", "</result>"
ROLES = ("system", "user", "assistant", "tool")
TOOL_FORMAT = (
    'To call a tool, write {open}{{"name": "TOOL", "arguments": {{...}}}}{close} and stop; its result '
    "comes back in {result_open}{result_close}. When you can answer, answer without a tool call."
)


def check_messages(value: Any) -> list[dict[str, Any]] | None:
    """The "messages" field of a request (None when absent); ValueError naming the problem."""
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ValueError(f"request 'messages' must be a non-empty list of messages, got {value!r:.80}")
    for i, m in enumerate(value):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise ValueError(
                f"request 'messages'[{i}] must be {{'role': one of {', '.join(ROLES)}, 'content': str}}, "
                f"got {m!r:.80}"
            )
        for j, call in enumerate(m.get("tool_calls") or ()):
            fn = call.get("function") if isinstance(call, dict) else None
            if (
                not isinstance(fn, dict)
                or not isinstance(fn.get("name"), str)
                or not isinstance(fn.get("arguments"), (dict, str))
            ):
                raise ValueError(
                    f"request 'messages'[{i}].tool_calls[{j}] must be {{'function': {{'name': str, "
                    f"'arguments': dict}}}}, got {call!r:.80}"
                )
    return value


def check_tools(value: Any) -> list[dict[str, Any]] | None:
    """The "tools" field of a request (None when absent); ValueError naming the problem."""
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ValueError(
            f"request 'tools' must be a non-empty list of function definitions, got {value!r:.80}"
        )
    for i, tool in enumerate(value):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise ValueError(
                f"request 'tools'[{i}] must be {{'type': 'function', 'function': {{'name': str, ...}}}}, "
                f"got {tool!r:.80}"
            )
    return value


def template_takes_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template renders tool definitions itself."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # several named templates: the default one, or one for tool use
        return "tool_use" in template or "tools" in str(template.get("default", ""))
    return isinstance(template, str) and "tools" in template


def render_chat(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """The prompt text of a conversation (special tokens included), ending with the assistant's turn."""
    if tools and template_takes_tools(tokenizer):
        return tokenizer.apply_chat_template(
            messages, tools=tools, tokenize=False, add_generation_prompt=True
        )
    return tokenizer.apply_chat_template(
        fallback_messages(messages, tools), tokenize=False, add_generation_prompt=True
    )


def fallback_messages(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> list[dict[str, str]]:
    """The conversation in plain system/user/assistant messages, for a template that knows no tools:
    the tool definitions in the system message, calls and results in teola's tool syntax, and
    consecutive user turns merged (templates that insist on alternating roles accept it)."""
    out: list[dict[str, str]] = []
    for m in messages:
        role, text = m["role"], m["content"]
        if role == "assistant" and m.get("tool_calls"):
            text += "".join(
                TOOL_OPEN
                + json.dumps({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
                + TOOL_CLOSE
                for c in m["tool_calls"]
            )
        elif role == "tool":
            role, text = "user", f"{RESULT_OPEN}{text}{RESULT_CLOSE}"
        if out and role == out[-1]["role"] == "user":
            out[-1]["content"] += "\n" + text
        else:
            out.append({"role": role, "content": text})
    if tools:
        listing = "\n".join(json.dumps(t["function"]) for t in tools)
        note = f"You can call these tools:\n{listing}\n" + TOOL_FORMAT.format(
            open=TOOL_OPEN, close=TOOL_CLOSE, result_open=RESULT_OPEN, result_close=RESULT_CLOSE
        )
        if out and out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{note}" if out[0]["content"] else note
        else:
            out.insert(0, {"role": "system", "content": note})
    return out
