"""The "agent" component (teola.compile.components.agent): one LLM call that pauses for tools inside a
template. A scripted test LLM writes each segment by how many tool results its continuation holds;
the tools are the real tool engine's calculator. Checked: the segments' requests (stop at the tool
call, one kv_key per query, pause handling, continuation = written text + result), the answer (the
last segment that ran), bad and failing calls read back as errors, the round limit, config errors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from teola import App, Engine, Node
from tests.unit.api.test_tool_calls import ScriptedLLM as ToolCallsLLM

CALL = 'Let me compute. <tool>{"name": "calculator", "arguments": {"expression": "17*23"}}'


class ScriptedLLM(ToolCallsLLM):
    """test_tool_calls' scripted LLM (segment k writes script[k]), answering prefills too."""

    ops = frozenset({"prefilling", "decoding"})

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if op != "decoding":
            return [{"num_prompt_tokens": 50} for _ in requests]
        return await super().execute(op, requests)


def agent_app(script: list[str], **config: Any) -> tuple[App, ScriptedLLM]:
    llm = ScriptedLLM(script)
    app = App("agent_test")
    app.register_engine(Engine("llm", kind="vllm", model="m"), backend=llm)
    app.register_engine(Engine("tools", kind="tool"))
    app.update_template(
        [
            Node(
                "agent",
                name="agent",
                engine="llm",
                config={"tool_engine": "tools", "tools": ["calculator"], "max_tokens": 32, **config},
            )
        ]
    )
    return app, llm


async def answer(app: App, question: str = "What is 17 times 23?") -> Any:
    try:
        return await app.run({"question": question})
    finally:
        await app.stop()


async def test_a_call_pauses_for_the_tool_and_continues_with_its_result():
    app, llm = agent_app([CALL, "17 times 23 is 391."])
    res = await answer(app)
    assert res.output == "17 times 23 is 391."
    first, second = llm.requests
    assert "</tool>" in first["stop"] and first["pause_kv"] == "discard" and first["api"] == "calculator"
    assert first["kv_key"] == second["kv_key"] and "continuation" not in first
    assert second["continuation"] == [CALL + "</tool>\n<result>391</result>\n"]
    assert second["parts"] == first["parts"] and "calculator" in first["parts"][0][1]


async def test_without_a_tool_call_the_first_segment_is_the_answer():
    app, llm = agent_app(["391."])
    res = await answer(app)
    assert res.output == "391." and len(llm.requests) == 1
    statuses = {t["primitive"]: t["status"] for t in res.trace}
    assert statuses["agent.round0.tool"] == "skipped" and statuses["agent.seg1.decode"] == "skipped"


@pytest.mark.parametrize(
    "call, error",
    [
        ('<tool>{"name": "search", "arguments": {}}', "error: unknown tool 'search'; tools: calculator"),
        ("<tool>{name: calculator", "error: the tool call is not JSON"),
        (
            '<tool>{"name": "calculator", "arguments": {"expression": "1/0"}}',
            "error: ValueError: division by zero",
        ),
    ],
)
async def test_bad_or_failing_tool_calls_come_back_to_the_model(call, error):
    app, llm = agent_app([call, "Sorry."])
    res = await answer(app)
    assert res.output == "Sorry."
    assert error in llm.requests[1]["continuation"][0]


async def test_the_last_round_may_not_pause_again():
    app, llm = agent_app([CALL], max_rounds=2)
    res = await answer(app)
    assert len(llm.requests) == 3 and res.output == CALL  # it kept asking; the round limit ended it
    assert all("</tool>" in r["stop"] and r["pause_kv"] == "discard" for r in llm.requests[:2])
    assert "</tool>" not in (llm.requests[2]["stop"] or []) and "pause_kv" not in llm.requests[2]
    assert llm.requests[2]["continuation"][0].count("<result>391</result>") == 2


async def test_each_querys_call_has_its_own_kv_key():
    app, llm = agent_app([CALL, "391."])
    try:
        await asyncio.gather(*(app.run({"question": f"q{i}"}) for i in range(3)))
    finally:
        await app.stop()
    keys = {r["kv_key"] for r in llm.requests}
    assert len(llm.requests) == 6 and len(keys) == 3


@pytest.mark.parametrize(
    "config, message",
    [
        ({"tool_engine": "llm"}, "tool_engine: must name a registered engine of kind 'tool'"),
        ({"tools": []}, "tools"),
        ({"handling": "keep"}, "handling"),
        ({"max_rounds": 9}, "max_rounds"),
    ],
)
def test_config_errors_name_the_option(config, message):
    with pytest.raises(ValueError, match=message):
        app, _ = agent_app(["x"], **config)
        app.compile({"question": "q"})


async def test_a_start_text_opens_the_first_segment_and_counts_as_written():
    app, llm = agent_app(
        ['calculator", "arguments": {"expression": "17*23"}}', "391."], start='<tool>{"name": "'
    )
    res = await answer(app)
    first, second = llm.requests
    assert res.output == "391." and first["continuation"] == ['<tool>{"name": "']
    call = '<tool>{"name": "calculator", "arguments": {"expression": "17*23"}}'
    assert second["continuation"] == [call + "</tool>\n<result>391</result>\n"]
