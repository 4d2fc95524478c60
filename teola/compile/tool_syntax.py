"""The syntax of a tool call inside an LLM's output, and of its result in the continued context:
pure text functions shared by `Program.call_with_tools` (teola.api.tool_calls) and the template
component "agent" (teola.compile.components.agent), which the runtime builds requests for.

The model writes `<tool>{"name": ..., "arguments": {...}}</tool>` (`TOOL_INSTRUCTION` asks it to);
its segment stops at CLOSE; the call continues with everything written so far + CLOSE + the result
in `<result>` tags (`continuation_text`). The tags are the ones the OpenAI door's chat rendering
writes for models whose template knows no tools (engines/llm_text/chat_messages.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engines.llm_text.chat_messages import RESULT_CLOSE, RESULT_OPEN
from engines.llm_text.chat_messages import TOOL_CLOSE as CLOSE
from engines.llm_text.chat_messages import TOOL_OPEN as OPEN

TOOL_INSTRUCTION = (
    'You can use these tools: {tools}. To use one, write <tool>{{"name": "TOOL", '
    '"arguments": {{...}}}}</tool> and stop; its result comes back in <result></result>. '
    "When you know the answer, write it without a tool call."
)

ANY_TOOL = "tool"  # a pausing segment's "api" when it may call any of several tools


def expected_tool(tools: Sequence[str]) -> str:
    """The API a pausing segment names ("api") before the model writes its call: the only tool it
    may call, else ANY_TOOL, whose duration is predicted as the mean over the tools seen
    (teola.scheduling.program.api_handling.api_seconds)."""
    return tools[0] if len(tools) == 1 else ANY_TOOL


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A parsed tool call: the tool's name and arguments, or `error` saying why it could not be parsed."""

    name: str | None
    arguments: dict[str, Any]
    error: str | None = None


def parse_tool_call(text: str) -> ToolCall | None:
    """The tool call a segment ended with (its output stops at CLOSE), or None when it wrote none."""
    start = text.rfind(OPEN)
    if start < 0:
        return None
    body = text[start + len(OPEN) :].strip()
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        return ToolCall(None, {}, f"the tool call is not JSON ({exc.msg} at {exc.pos})")
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return ToolCall(None, {}, 'the tool call must be {"name": "...", "arguments": {...}}')
    args = obj.get("arguments", {})
    if not isinstance(args, dict):
        return ToolCall(obj["name"], {}, "the tool call's arguments must be a JSON object")
    return ToolCall(obj["name"], args)


def result_segment(result: Any) -> str:
    """The text appended after a tool call: its result (JSON when not a string) in <result> tags."""
    text = result if isinstance(result, str) else json.dumps(result, default=str)
    return f"\n{RESULT_OPEN}{text}{RESULT_CLOSE}\n"


def continuation_text(texts: Sequence[str], results: Sequence[Any]) -> str:
    """What a call that paused len(results) times has written to its context: each segment's text,
    CLOSE, and its tool's result (`result_segment`)."""
    return "".join(t + CLOSE + result_segment(r) for t, r in zip(texts, results))
