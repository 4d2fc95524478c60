"""Tool calling through the OpenAI door, on a deterministic simulated LLM that writes tool calls in
teola's syntax (tests/support/tool_sim.py): the official client gets OpenAI's `tool_calls`, whole
and as streamed deltas, with finish_reason "tool_calls"; tool results and the assistant's calls
go back to the engine in the conversation; the parser also reads the Hermes/Qwen syntax and
leaves text that is no call alone."""

from __future__ import annotations

import json

import openai

from teola.server.openai.tools import ToolStream, parse_tool_calls
from tests.support.tool_sim import ToolCallingSim
from tests.unit.server.test_openai_door import serve

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}
QUESTION = [{"role": "user", "content": "Weather in Paris?"}]


def client(http) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url="http://teola.test/v1", api_key="none", http_client=http, max_retries=0
    )


async def test_a_tool_call_comes_back_in_openai_shape_and_its_result_goes_back_in():
    async with serve(engine=ToolCallingSim("llm")) as (http, _, llm):
        sdk = client(http)
        first = await sdk.chat.completions.create(model="agent", messages=QUESTION, tools=[WEATHER])
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content == "Let me check."
        [call] = choice.message.tool_calls
        assert call.type == "function" and call.function.name == "get_weather" and call.id.startswith("call_")
        assert json.loads(call.function.arguments) == {"query": "Weather in Paris?"}
        assert llm.requests[-1]["tools"] == [WEATHER]
        history = QUESTION + [
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "18C, sunny"},
        ]
        second = await sdk.chat.completions.create(model="agent", messages=history, tools=[WEATHER])
        assert second.choices[0].finish_reason == "stop" and not second.choices[0].message.tool_calls
        assert second.choices[0].message.content == "From the tools: 18C, sunny"
        sent = llm.requests[-1]["messages"]
        assert sent[1]["tool_calls"][0]["function"] == {
            "name": "get_weather",
            "arguments": {"query": "Weather in Paris?"},
        }
        assert sent[2] == {"role": "tool", "tool_call_id": call.id, "content": "18C, sunny"}


async def test_streamed_tool_calls_arrive_as_deltas_and_never_as_text():
    async with serve(engine=ToolCallingSim("llm")) as (http, _, _llm):
        stream = await client(http).chat.completions.create(
            model="agent", messages=QUESTION, tools=[WEATHER], stream=True
        )
        chunks = [c async for c in stream]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        deltas = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
        assert text == "Let me check. " and "<tool>" not in text
        assert [(d.index, d.function.name) for d in deltas] == [(0, "get_weather")] and deltas[0].id
        assert json.loads(deltas[0].function.arguments) == {"query": "Weather in Paris?"}
        assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_tool_choice_none_offers_no_tools_and_parallel_false_keeps_one_call():
    async with serve(engine=ToolCallingSim("llm")) as (http, _, llm):
        plain = await client(http).chat.completions.create(
            model="agent", messages=QUESTION, tools=[WEATHER], tool_choice="none"
        )
        assert plain.choices[0].finish_reason == "stop" and "tools" not in llm.requests[-1]
    two = (
        '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "b", "arguments": {}}</tool_call>'
    )
    assert [c["function"]["name"] for c in parse_tool_calls(two, parallel=False)[1]] == ["a"]


def test_the_parser_reads_both_syntaxes_and_keeps_text_that_is_no_call():
    text, calls = parse_tool_calls(
        'Sure.\n<tool_call>\n{"name": "lookup", "arguments": {"q": "x"}}\n</tool_call>'
    )
    assert text == "Sure." and calls[0]["function"] == {"name": "lookup", "arguments": '{"q": "x"}'}
    text, calls = parse_tool_calls(
        '<tool>{"name": "lookup", "parameters": {"q": 1}}'
    )  # unclosed: stopped there
    assert calls[0]["function"]["arguments"] == '{"q": 1}'
    assert parse_tool_calls("a <tool>not json</tool> b") == ("a <tool>not json</tool> b", [])
    stream = ToolStream(parallel=True)
    sent = [stream.feed(p) for p in ["x <", "b> y <to", 'ol>{"name": "f"}', "</tool>"]]
    assert sent == ["x ", "<b> y ", "", ""] and stream.finish()[1][0]["function"]["name"] == "f"
