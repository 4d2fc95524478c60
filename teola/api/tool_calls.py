"""LLM calls that pause for tools (LAMPS, ../shared/papers/lamps.md §2): the model writes a tool call,
generation stops there, teola runs the tool, and the same call continues with the result appended
to its context, as one call of one program.

Syntax the model is asked to write (`TOOL_INSTRUCTION`): `<tool>{"name": ..., "arguments": {...}}</tool>`.
Each segment is an LLM request with `stop=["</tool>"]`; when the output holds an opening `<tool>`,
the call is parsed (`parse_tool_call`), the tool runs, and the next segment is the same prompt with
`continuation` = [everything written so far + "</tool>", the tool's result in `<result>` tags]. The
segments share `kv_key` = "<program>/<call id>", and each pausing segment names the API it is
expected to call (`api`: `tool_syntax.expected_tool`) and is submitted with what the engine should
do with its KV during the tool call (the hint `pause_kv`: preserve / discard / swap, or "auto":
INFERCEPT's waste equations, `choose_pause_handling`, resolved by the engine's scheduler when the
segment is queued, from its length prediction, as the template "agent" component's segments are;
the call's outcome says which handling it got). The simulated engine enforces it
(engines/sim/admission.py); vLLM cannot pin or swap a finished request's blocks, so on vLLM every
handling is "discard" with the prefix cache keeping what it can (docs/program_scheduling.md).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from teola.compile.tool_syntax import (
    CLOSE,
    OPEN,
    TOOL_INSTRUCTION,
    ToolCall,
    expected_tool,
    parse_tool_call,
    result_segment,
)
from teola.runtime import choose_pause_handling, llm_request

__all__ = [
    "CLOSE",
    "OPEN",
    "TOOL_INSTRUCTION",
    "Tool",
    "ToolCall",
    "choose_pause_handling",
    "continue_with_tools",
    "observe_tool",
    "parse_tool_call",
    "result_segment",
    "run_tool",
]

Tool = Callable[..., Any] | Callable[..., Awaitable[Any]]


async def run_tool(tools: Mapping[str, Tool], call: ToolCall) -> tuple[Any, float]:
    """(result, seconds) of one tool call; unknown tools and tool errors become an error result the
    model reads, so a bad call does not end the program."""
    t0 = time.perf_counter()
    if call.error is not None:
        return f"error: {call.error}", 0.0
    fn = tools.get(call.name or "")
    if fn is None:
        return f"error: unknown tool {call.name!r}; tools: {', '.join(sorted(tools))}", 0.0
    try:
        out = fn(**call.arguments)
        if inspect.isawaitable(out):
            out = await out
    except Exception as exc:  # the model sees the failure and can try again
        out = f"error: {type(exc).__name__}: {exc}"
    return out, time.perf_counter() - t0


def observe_tool(policy: Any, tool: str | None, seconds: float) -> None:
    """Feed a tool's measured duration to the policy's online estimate (policies that keep one)."""
    if tool:
        policy.observe_api(tool, seconds)


async def continue_with_tools(
    rt: Any,
    program: Any,
    call_id: str,
    parts: list[list[str]],
    tools: Mapping[str, Tool],
    parent_ids: Any,
    max_rounds: int,
    handling: str,
    gen: dict[str, Any],
    start: str | None = None,
) -> tuple[str, dict[str, Any], str | None]:
    """Run the segments of one pausing call on `program.engine` (see the module docstring); returns
    (the text after the last tool call, the last segment's result with "pauses" and "transcript",
    the instance that ran it). `start`: the text the model's answer begins with (sent as the first
    segment's continuation and counted as that segment's text)."""
    policy = rt.schedulers[program.engine].policy
    key = f"{program.program_id}/{call_id}"
    written: list[str] = []  # everything the model and the tools added to the assistant turn
    pauses: list[dict[str, Any]] = []
    parents = None if parent_ids is None else list(parent_ids)
    stop = list(gen.get("stop") or []) + [CLOSE]
    predictor = getattr(program, "predictor", None)
    predicted = None if predictor is None else max(1, int(predictor(parts[-1][1])))
    for round_no in range(max_rounds + 1):
        before = "".join(written) if written else (start or "")
        last_round = round_no == max_rounds
        req = _segment_request(
            parts, {**gen, "stop": stop}, key, before, None if last_round else sorted(tools)
        )
        outcome = await rt.submit_call(
            program.engine,
            req,
            program=program.program_id,
            call_id=call_id if round_no == 0 else f"{call_id}#{round_no}",
            parents=parents if round_no == 0 else [call_id if round_no == 1 else f"{call_id}#{round_no - 1}"],
            predicted_tokens=predicted,
            # "auto" is resolved when the engine's scheduler queues it
            pause_kv=None if last_round else handling,
            # its KV waits for it: run it first
            resumes_preserved=bool(pauses and pauses[-1]["handling"] == "preserve"),
        )
        text = outcome.result.get("text", "")
        if round_no == 0 and start:
            text = start + text
        if pauses:
            pauses[-1]["cached_tokens"] = outcome.result.get("num_cached_tokens", 0)
        call = None if last_round else parse_tool_call(text)
        if call is None:
            result = {**outcome.result, "pauses": pauses, "transcript": "".join(written) + text}
            return text, result, outcome.instance
        value, seconds = await run_tool(tools, call)
        if call.error is None and call.name in tools:
            observe_tool(policy, call.name, seconds)
        written += [text + CLOSE, result_segment(value)]
        pauses.append(_pause(call, seconds, outcome.pause_kv))
    raise AssertionError("unreachable: the last round never pauses")


def _segment_request(
    parts: list[list[str]], gen: dict[str, Any], key: str, before: str, tools: list[str] | None
) -> dict[str, Any]:
    """One segment's LLM request: the call's prompt, its KV key, what the turn holds so far (`before`)
    as the continuation, and the API it may stop at (none on the last round: `tools` None)."""
    return {
        **llm_request(parts, True, gen),
        "kv_key": key,
        "continuation": [before] if before else [],
        **({} if tools is None else {"api": expected_tool(tools)}),
    }


def _pause(call: ToolCall, seconds: float, handling: str | None) -> dict[str, Any]:
    """What the result's "pauses" say of one pause: the tool call, its seconds, the handling applied."""
    return {
        "tool": call.name,
        "arguments": call.arguments,
        "seconds": seconds,
        "handling": handling,
        "error": call.error,
    }
