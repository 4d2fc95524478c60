"""Structured outputs through the OpenAI door (on a simulated engine that declares them the way
vLLM does: tests/support/structured_sim.py): response_format json_schema and json_object reach the
engine request as typed generation options, tool_choice "required" or a named function becomes a
schema-constrained decode returned as a tool call (whole and streamed), LangChain's
`with_structured_output` works with both its methods, and an engine without structured outputs
refuses with a 400 naming the capability and the field."""

from __future__ import annotations

import json

import openai
import pytest
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from tests.support.structured_sim import StructuredSim
from tests.unit.server.test_openai_door import serve

USER = [{"role": "user", "content": "Name a fruit and its colour."}]
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "ripe": {"type": "boolean"}},
    "required": ["name", "ripe"],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} of a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
    for name in ("weather", "population")
]


class Fruit(BaseModel):
    name: str
    colour: str
    seeds: int


def client(http) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url="http://teola.test/v1", api_key="none", http_client=http, max_retries=0
    )


async def test_a_json_schema_reaches_the_engine_and_the_sdk_parses_the_answer():
    async with serve(engine=StructuredSim("llm")) as (http, _, llm):
        parsed = await client(http).chat.completions.parse(
            model="agent", messages=USER, response_format=Fruit
        )
        assert parsed.choices[0].message.parsed == Fruit(name="text", colour="text", seeds=1)
        assert llm.requests[-1]["json_schema"]["properties"].keys() == {"name", "colour", "seeds"}
        r = await http.post(
            "/v1/chat/completions",
            json={
                "model": "agent",
                "messages": USER,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "fruit", "schema": SCHEMA, "strict": True},
                },
            },
        )
        assert json.loads(r.json()["choices"][0]["message"]["content"]) == {"name": "text", "ripe": True}
        assert llm.requests[-1]["json_schema"] == SCHEMA and "json_object" not in llm.requests[-1]
        plain = await client(http).chat.completions.create(
            model="agent", messages=USER, response_format={"type": "json_object"}
        )
        assert (
            set(json.loads(plain.choices[0].message.content)) == {"answer"}
            and llm.requests[-1]["json_object"]
        )


async def test_a_named_tool_choice_is_a_constrained_call_returned_as_a_tool_call():
    async with serve(engine=StructuredSim("llm")) as (http, _, llm):
        sdk = client(http)
        answer = await sdk.chat.completions.create(
            model="agent",
            messages=USER,
            tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "population"}},
        )
        choice = answer.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        [call] = choice.message.tool_calls
        assert call.function.name == "population" and json.loads(call.function.arguments) == {
            "city": "text",
            "days": 1,
        }
        assert llm.requests[-1]["json_schema"] == TOOLS[1]["function"]["parameters"]
        assert [t["function"]["name"] for t in llm.requests[-1]["tools"]] == ["weather", "population"]
        stream = await sdk.chat.completions.create(
            model="agent",
            messages=USER,
            tools=TOOLS,
            stream=True,
            tool_choice={"type": "function", "function": {"name": "weather"}},
        )
        chunks = [c async for c in stream]
        assert chunks[0].choices[0].delta.role == "assistant" and not any(
            c.choices[0].delta.content for c in chunks
        )
        [delta] = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
        assert delta.function.name == "weather" and json.loads(delta.function.arguments)["city"] == "text"
        assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_required_tool_choice_picks_one_of_the_tools():
    async with serve(engine=StructuredSim("llm")) as (http, _, llm):
        answer = await client(http).chat.completions.create(
            model="agent", messages=USER, tools=TOOLS, tool_choice="required"
        )
        [call] = answer.choices[0].message.tool_calls
        assert call.function.name == "weather" and json.loads(call.function.arguments) == {
            "city": "text",
            "days": 1,
        }
        options = llm.requests[-1]["json_schema"]["anyOf"]
        assert [o["properties"]["name"]["const"] for o in options] == ["weather", "population"]


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
async def test_langchain_with_structured_output(method):
    async with serve(engine=StructuredSim("llm")) as (http, _, llm):
        model = ChatOpenAI(
            model="agent",
            base_url="http://teola.test/v1",
            api_key="none",
            temperature=0,
            http_async_client=http,
            max_retries=0,
        )
        fruit = await model.with_structured_output(Fruit, method=method).ainvoke("Name a fruit.")
        assert fruit == Fruit(name="text", colour="text", seeds=1)
        assert llm.requests[-1]["json_schema"]["required"] == ["name", "colour", "seeds"]


@pytest.mark.parametrize(
    "extra, param",
    [
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}},
            "response_format",
        ),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"tools": TOOLS, "tool_choice": "required"}, "tool_choice"),
    ],
)
async def test_an_engine_without_structured_outputs_refuses_naming_it(extra, param):
    async with serve() as (http, _, llm):  # the plain simulated engine declares none
        r = await http.post("/v1/chat/completions", json={"model": "agent", "messages": USER, **extra})
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert (
            error["param"] == param
            and "structured outputs" in error["message"]
            and "'llm'" in error["message"]
        )
        assert not llm.requests


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "response_format"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"tools": TOOLS, "tool_choice": {"type": "function"}}, "tool_choice"),
        (
            {"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}},
            "response_format",
        ),
    ],
)
async def test_malformed_structured_requests_name_the_field(extra, param):
    async with serve(engine=StructuredSim("llm")) as (http, _, llm):
        r = await http.post("/v1/chat/completions", json={"model": "agent", "messages": USER, **extra})
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
        assert not llm.requests
