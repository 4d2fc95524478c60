"""Tool calling on the OpenAI-compatible door: a request's `tools`, `tool_choice` and
`parallel_tool_calls` checked, and the model's tool calls found in its output text and returned in
OpenAI's ``tool_calls`` shape (a whole message, or streamed deltas through `ToolStream`).

The model writes calls in its chat template's syntax or, when the template knows no tools, in
teola's (engines/llm_text/chat_messages.py). Recognised: ``<tool>{"name", "arguments"}</tool>``
(teola.compile.tool_syntax) and ``<tool_call>{"name", "arguments"}</tool_call>`` (Hermes, Qwen
and the templates that copy them); "parameters" is taken for "arguments" (Llama 3.1). A closing tag
may be missing at the end of the output (the model stopped there). A block that is not such a JSON
object stays in the message's text, so nothing the model wrote is lost.

tool_choice "required" or a named function forces one call: the output is decoded under the
engine's structured outputs as the tool's arguments object (`ForcedCall`) and returned as a call.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from teola.compile.tool_syntax import parse_tool_call
from teola.server.errors import ApiError

TAGS = (("<tool>", "</tool>"), ("<tool_call>", "</tool_call>"))
_BLOCK = re.compile("|".join(f"{re.escape(o)}(.*?)(?:{re.escape(c)}|$)" for o, c in TAGS), re.S)


def _invalid(detail: str, param: str) -> ApiError:
    return ApiError(400, "invalid_value", detail, param=param)


@dataclass(frozen=True, slots=True)
class ForcedCall:
    """A call tool_choice forces ("required", or a named function): the model's output is
    constrained (structured outputs) to `schema`, the arguments object of the one tool it may call,
    or, with several, {"name": <one of them>, "arguments": {...}}; `calls` reads it back."""

    names: tuple[str, ...]
    schema: dict[str, Any]

    @classmethod
    def of(cls, tools: list[dict[str, Any]]) -> ForcedCall:
        params = {
            t["function"]["name"]: t["function"].get("parameters") or {"type": "object", "properties": {}}
            for t in tools
        }
        if len(params) == 1:
            return cls(tuple(params), next(iter(params.values())))
        return cls(
            tuple(params),
            {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"name": {"const": name}, "arguments": schema},
                        "required": ["name", "arguments"],
                        "additionalProperties": False,
                    }
                    for name, schema in params.items()
                ]
            },
        )

    def calls(self, text: str) -> list[dict[str, Any]]:
        """The forced call in OpenAI's shape, or [] when `text` is not the JSON the schema asks for
        (the decode was cut short by max_tokens): it is then returned as text."""
        try:
            obj = json.loads(text)
        except ValueError:
            return []
        if len(self.names) > 1:
            if (
                not isinstance(obj, dict)
                or obj.get("name") not in self.names
                or not isinstance(obj.get("arguments"), dict)
            ):
                return []
            name, obj = obj["name"], obj["arguments"]
        else:
            name = self.names[0]
        if not isinstance(obj, dict):
            return []
        return [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(obj)},
            }
        ]


def offered_tools(body: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, bool, ForcedCall | None]:
    """(the function definitions rendered into the prompt, or None; whether several calls may come
    back; the call tool_choice forces, or None) of a chat request. tool_choice "auto" (the default)
    lets the model choose; "none" keeps the tools out of the prompt; "required" (one call of any
    tool) and {"type": "function", "function": {"name": ...}} (that tool) force one call, decoded
    under structured outputs (`ForcedCall`)."""
    tools = body.get("tools")
    choice = body.get("tool_choice")
    if tools is None:
        if choice not in (None, "none", "auto"):
            raise _invalid("tool_choice names a tool but the request has no tools", "tool_choice")
        return None, False, None
    if not isinstance(tools, list) or not tools:
        raise _invalid("tools must be a non-empty list of {'type': 'function', 'function': {...}}", "tools")
    checked = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type", "function") != "function"
            or not isinstance(fn, dict)
        ):
            raise _invalid(
                f"tools[{i}] must be {{'type': 'function', 'function': {{'name', 'description', "
                f"'parameters'}}}}, got {tool!r:.80}",
                f"tools[{i}]",
            )
        if not isinstance(fn.get("name"), str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", fn["name"]):
            raise _invalid(
                f"tools[{i}].function.name must be 1-64 letters, digits, '_' or '-', got {fn.get('name')!r}",
                f"tools[{i}].function.name",
            )
        if not isinstance(fn.get("parameters", {}), dict):
            raise _invalid(
                f"tools[{i}].function.parameters must be a JSON schema object",
                f"tools[{i}].function.parameters",
            )
        checked.append(
            {
                "type": "function",
                "function": {
                    k: fn[k] for k in ("name", "description", "parameters") if fn.get(k) is not None
                },
            }
        )
    if choice == "none":
        return None, False, None
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise _invalid(f"parallel_tool_calls must be a boolean, got {parallel!r}", "parallel_tool_calls")
    return checked, parallel is not False, _forced(choice, checked)


def _forced(choice: Any, tools: list[dict[str, Any]]) -> ForcedCall | None:
    if choice in (None, "auto"):
        return None
    if choice == "required":
        return ForcedCall.of(tools)
    fn = choice.get("function") if isinstance(choice, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(choice, dict) or choice.get("type") != "function" or not isinstance(name, str):
        raise _invalid(
            f"tool_choice must be \"auto\", \"none\", \"required\" or {{'type': 'function', 'function': "
            f"{{'name': ...}}}}, got {choice!r:.80}",
            "tool_choice",
        )
    named = [t for t in tools if t["function"]["name"] == name]
    if not named:
        raise _invalid(
            f"tool_choice names {name!r}, which is not among the request's tools "
            f"({', '.join(t['function']['name'] for t in tools)})",
            "tool_choice",
        )
    return ForcedCall.of(named)


def parse_tool_calls(text: str, parallel: bool = True) -> tuple[str, list[dict[str, Any]]]:
    """(the text outside the tool calls, the calls in OpenAI's shape) of a model's output; with
    `parallel` False only the first call is kept."""
    calls: list[dict[str, Any]] = []
    kept: list[str] = []
    at = 0
    for match in _BLOCK.finditer(text):
        body = next(g for g in match.groups() if g is not None)
        parsed = parse_tool_call("<tool>" + body.strip())
        call = _llama_call(body) or (
            (parsed.name, parsed.arguments) if parsed and parsed.error is None else None
        )
        if call is None:
            continue  # not a call: it stays in the text
        kept.append(text[at : match.start()])
        at = match.end()
        if parallel or not calls:
            calls.append(
                {
                    "id": f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": {"name": call[0], "arguments": json.dumps(call[1])},
                }
            )
    kept.append(text[at:])
    return "".join(kept).strip(), calls


def _llama_call(body: str) -> tuple[str, dict[str, Any]] | None:
    """A call written with "parameters" instead of "arguments"; None when `body` is no call."""
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if (
        isinstance(obj, dict)
        and isinstance(obj.get("name"), str)
        and "arguments" not in obj
        and isinstance(obj.get("parameters"), dict)
    ):
        return obj["name"], obj["parameters"]
    return None


def _open_at(text: str) -> int:
    """Where the first tool-call tag starts in `text`, or where a tag may be starting at its end
    (a prefix of one), or -1."""
    found = [i for i in (text.find(o) for o, _ in TAGS) if i >= 0]
    if found:
        return min(found)
    for k in range(min(len(text), max(len(o) for o, _ in TAGS)), 0, -1):
        if any(o.startswith(text[-k:]) for o, _ in TAGS):
            return len(text) - k
    return -1


class ToolStream:
    """Streams a tools-enabled answer: text is passed on until a tool-call tag may start; from there
    on the rest is held and parsed at the end (`finish`), so a call never reaches the client as
    text and text that turns out not to be a call is still sent."""

    def __init__(self, parallel: bool) -> None:
        self.parallel = parallel
        self._held = ""
        self._capturing = False

    def feed(self, piece: str) -> str:
        """The text of `piece` that can be sent now."""
        if self._capturing:
            self._held += piece
            return ""
        text = self._held + piece
        cut = _open_at(text)
        if cut < 0:
            self._held = ""
            return text
        self._held = text[cut:]
        self._capturing = any(o in self._held for o, _ in TAGS)
        return text[:cut]

    def finish(self) -> tuple[str, list[dict[str, Any]]]:
        """(the held text that was no call, the calls) once the output is complete."""
        rest, calls = parse_tool_calls(self._held, self.parallel)
        return (rest if calls else self._held), calls
