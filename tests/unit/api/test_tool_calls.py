"""LLM calls that pause for tools (teola.api.tool_calls, Program.call_with_tools): parsing of the tool
call syntax, the continuation each segment sends (what was written + the tool's result), the pause
handling named on each pausing segment, the policy's per-tool duration estimate fed, and bad tool
calls returned to the model as error results. The engine is a scripted test LLM that answers each
segment by how many tool results its continuation already holds."""

from __future__ import annotations

from typing import Any

import pytest

from teola.api.program import Program
from teola.api.tool_calls import CLOSE, parse_tool_call, result_segment
from teola.ir.engine_spec import Engine
from teola.runtime import Runtime


class ScriptedLLM:
    """Segment k of a call (k tool results in its continuation) writes script[k]; a text ending in
    a tool call stops before CLOSE like a stop string does."""

    ops = frozenset({"decoding"})

    def __init__(self, script: list[str]) -> None:
        from engines.protocol import EngineProfile

        self.name, self.script, self.requests = "llm", script, []
        self.profile = EngineProfile(8, 8)

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def health(self) -> bool:
        return True

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for r in requests:
            self.requests.append(r)
            k = "".join(r.get("continuation") or []).count("<result>")
            text = self.script[min(k, len(self.script) - 1)]
            out.append(
                {
                    "text": text,
                    "num_prompt_tokens": 50 + 10 * k,
                    "num_output_tokens": 7,
                    "num_cached_tokens": 40 * k,
                }
            )
        return out


def runtime(script: list[str], policy: str = "fifo") -> tuple[Runtime, ScriptedLLM]:
    engine = ScriptedLLM(script)
    rt = Runtime({"llm": Engine("llm", kind="vllm", model="m")}, {"llm": engine}, policy=policy)
    return rt, engine


def test_parse_tool_call():
    assert parse_tool_call("no call here") is None
    call = parse_tool_call('Let me compute. <tool>{"name": "calculator", "arguments": {"expression": "2*3"}}')
    assert call.name == "calculator" and call.arguments == {"expression": "2*3"} and call.error is None
    assert "not JSON" in parse_tool_call("<tool>{name: calc").error
    assert "must be" in parse_tool_call('<tool>["calculator"]').error
    assert "arguments" in parse_tool_call('<tool>{"name": "c", "arguments": 3}').error
    assert result_segment({"x": 1}) == '\n<result>{"x": 1}</result>\n'


async def test_a_call_pauses_for_two_tools_and_continues_with_their_results():
    script = [
        'First <tool>{"name": "add", "arguments": {"a": 2, "b": 3}}',
        'Then <tool>{"name": "double", "arguments": {"x": 5}}',
        "The answer is 10.",
    ]
    seen = []

    async def double(x):
        seen.append(("double", x))
        return x * 2

    def add(a, b):
        seen.append(("add", a, b))
        return a + b

    rt, engine = runtime(script)
    await rt.start()
    try:
        async with Program(rt, "agent-1") as prog:
            res = await prog.call_with_tools(
                "What is (2+3)*2?", {"add": add, "double": double}, handling="preserve", max_tokens=32
            )
    finally:
        await rt.stop()
    assert str(res) == "The answer is 10." and seen == [("add", 2, 3), ("double", 5)]
    conts = [r.get("continuation") for r in engine.requests]
    assert conts[0] == []
    assert conts[1] == [script[0] + CLOSE + "\n<result>5</result>\n"]
    assert conts[2] == [
        script[0] + CLOSE + "\n<result>5</result>\n" + script[1] + CLOSE + "\n<result>10</result>\n"
    ]
    assert {r["kv_key"] for r in engine.requests} == {"agent-1/call-1"}
    assert [r.get("pause_kv") for r in engine.requests] == ["preserve", "preserve", "preserve"]
    # the continuations of preserved pauses are marked so the API-call-aware policies run them first
    assert [bool(r.get("resumes_preserved")) for r in engine.requests] == [False, True, True]
    assert all(CLOSE in r["stop"] for r in engine.requests)
    assert [p["tool"] for p in res.result["pauses"]] == ["add", "double"]
    assert [p["cached_tokens"] for p in res.result["pauses"]] == [40, 80]
    assert res.result["transcript"].endswith("The answer is 10.")


async def test_the_last_allowed_round_does_not_pause_and_bad_calls_come_back_as_errors():
    script = ['<tool>{"name": "nope", "arguments": {}}', "<tool>{broken", '<tool>{"name": "boom"}']
    rt, engine = runtime(script, policy="lamps")
    await rt.start()
    try:
        async with Program(rt, "agent-2") as prog:
            res = await prog.call_with_tools("go", {"boom": print}, max_rounds=2)
        api_mean = dict(rt.schedulers["llm"].policy.api_mean)
    finally:
        await rt.stop()
    errors = [p["error"] for p in res.result["pauses"]]
    assert len(engine.requests) == 3 and "pause_kv" not in engine.requests[-1]
    assert errors[0] is None and "not JSON" in errors[1]
    cont = engine.requests[-1]["continuation"][0]
    assert "error: unknown tool 'nope'; tools: boom" in cont and "error: the tool call is not JSON" in cont
    # auto handling on the lamps policy: its per-tool estimate was fed with what the tools took
    assert all(p["handling"] in ("preserve", "discard") for p in res.result["pauses"])
    assert api_mean == {}  # neither an unknown tool nor an unparsed call ran, so nothing was observed


async def test_a_failing_tool_becomes_an_error_result_and_a_working_one_is_timed():
    from teola.api.tool_calls import ToolCall, run_tool

    def boom():
        raise RuntimeError("tool exploded")

    out, _ = await run_tool({"boom": boom}, ToolCall("boom", {}))
    assert out == "error: RuntimeError: tool exploded"
    out, seconds = await run_tool({"sq": lambda x: x * x}, ToolCall("sq", {"x": 4}))
    assert out == 16 and seconds >= 0


async def test_a_start_text_begins_the_answer_and_counts_as_the_first_segments_text():
    # the model writes only what follows the start; the call it completes is parsed and run
    script = ['calc", "arguments": {"x": 4}}', "It is 16."]
    rt, engine = runtime(script)
    await rt.start()
    try:
        async with Program(rt, "agent-4") as prog:
            res = await prog.call_with_tools(
                "q", {"calc": lambda x: x * x}, start='<tool>{"name": "', max_tokens=16
            )
    finally:
        await rt.stop()
    first = '<tool>{"name": "calc", "arguments": {"x": 4}}'
    assert [r["continuation"] for r in engine.requests] == [
        ['<tool>{"name": "'],
        [first + CLOSE + "\n<result>16</result>\n"],
    ]
    assert [p["tool"] for p in res.result["pauses"]] == ["calc"]
    assert (
        str(res) == "It is 16."
        and res.result["transcript"] == first + CLOSE + "\n<result>16</result>\nIt is 16."
    )


async def test_call_with_tools_rejects_bad_arguments():
    rt, _ = runtime(["x"])
    prog = Program(rt, "p")
    with pytest.raises(ValueError, match="tools must be"):
        await prog.call_with_tools("q", {})
    with pytest.raises(ValueError, match="handling"):
        await prog.call_with_tools("q", {"t": print}, handling="keep")
    with pytest.raises(TypeError, match="unknown generation option"):
        await prog.call_with_tools("q", {"t": print}, top_k=3)
    with pytest.raises(TypeError, match="start must be a string"):
        await prog.call_with_tools("q", {"t": print}, start=3)


async def test_pausing_segments_name_their_api_and_auto_uses_the_predicted_context():
    # (issue 62: segments carried no "api", and the first pause was chosen with a 1-token context.)
    # Recompute 1e-3 s/token, a 0.05 s tool, alone: preserve 0.05 x C < discard 1e-3 x C x C once C > 50;
    # a 1-token context would discard. Here C = the prompt
    # (instruction + question, > 60 tokens) + 20 predicted.
    script = ['<tool>{"name": "calc", "arguments": {}}', "done"]
    engine = ScriptedLLM(script)
    rt = Runtime(
        {"llm": Engine("llm", kind="vllm", model="m")},
        {"llm": engine},
        policy="lamps",
        policy_options={"lamps": {"fwd_s_per_token": 1e-3, "api_defaults": {"calc": 0.05}}},
    )
    await rt.start()
    try:
        async with Program(rt, "agent-3", predictor=lambda prompt: 20) as prog:
            res = await prog.call_with_tools("What is 2+3?", {"calc": lambda: 5}, max_tokens=32)
    finally:
        await rt.stop()
    first, last = engine.requests
    assert first["api"] == last["api"] == "calc" and first["predicted_tokens"] == 20  # each may pause
    assert first["pause_kv"] == "preserve" == res.result["pauses"][0]["handling"]
    assert last.get("resumes_preserved") is True
