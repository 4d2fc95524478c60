"""The OpenAI door with real clients against the real engine (uvicorn on loopback, in-process vLLM,
SmolLM2-135M on CPU; no mock on either side): the official `openai` client, sync and async,
streamed and not, through the model's chat template (whole conversations; completion prompts raw);
OpenAI's error classes; tool calls parsed from what the model writes; and LangGraph's
`create_react_agent` with two tools running its loop to an answer.

SmolLM2-135M does not call tools from instructions alone. Shown two worked tool calls in the
conversation (`SHOTS`), it writes ``<tool>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool>``
at temperature 0 (checked on this model), so the parsing assertions are deterministic; the LangGraph
test asserts only what holds whatever the model says."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
import pytest_asyncio

from bench.lib.results import served_here
from teola import App, Engine, Node
from teola.server import ServerSettings, create_server
from tests.support.borrowed import Borrowed

pytestmark = pytest.mark.engines

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {what} of a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
    for name, what in (("get_weather", "current weather"), ("get_population", "population"))
]


def _call(i: int, name: str, city: str) -> dict[str, Any]:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({"city": city})},
    }


SHOTS = [
    {"role": "user", "content": "What is the weather in Rome?"},
    {"role": "assistant", "content": "", "tool_calls": [_call(1, "get_weather", "Rome")]},
    {"role": "tool", "tool_call_id": "call_1", "content": "20C, sunny"},
    {"role": "assistant", "content": "It is 20C and sunny in Rome."},
    {"role": "user", "content": "What is the population of Oslo?"},
    {"role": "assistant", "content": "", "tool_calls": [_call(2, "get_population", "Oslo")]},
    {"role": "tool", "tool_call_id": "call_2", "content": "700,000"},
    {"role": "assistant", "content": "Oslo has about 700,000 people."},
]
PARIS = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def door(llm_engine) -> AsyncIterator[tuple[str, Borrowed]]:
    """teola serving an app on the session's vLLM engine, on a loopback port: (base url, the engine)."""
    app = App("chat", config={"runtime": {"policy": "atlas"}})
    llm = Borrowed(llm_engine)
    app.register_engine(Engine("llm", kind="vllm"), backend=llm)
    app.update_template(
        [
            Node(
                "llm",
                name="answer",
                engine="llm",
                config={"parts": [["question", "$query.question"]], "max_tokens": 8},
            )
        ]
    )
    async with served_here(create_server({"chat": app}, ServerSettings())) as url:
        yield f"{url}/v1", llm


async def test_sync_async_and_streamed_answers_agree_through_the_chat_template(door, llm_engine):
    url, llm = door
    conversation = [
        {"role": "system", "content": "Answer in one short sentence."},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "What is the capital of France?"},
    ]
    sync = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
    whole = await asyncio.to_thread(
        sync.chat.completions.create, model="chat", messages=conversation, max_tokens=12, temperature=0
    )
    client = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0)
    again = await client.chat.completions.create(
        model="chat", messages=conversation, max_tokens=12, temperature=0
    )
    stream = await client.chat.completions.create(
        model="chat",
        messages=conversation,
        max_tokens=12,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert (
        whole.choices[0].message.content
        and streamed == again.choices[0].message.content == whole.choices[0].message.content
    )
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == [whole.choices[0].finish_reason] and finish[0] in ("stop", "length")
    assert (whole.choices[0].finish_reason == "length") == (whole.usage.completion_tokens == 12)
    # the whole conversation went through the model's chat template, turn by turn
    template = llm_engine.renderer.tokenizer.apply_chat_template(
        conversation, tokenize=False, add_generation_prompt=True
    )
    assert "<|im_start|>assistant\nHello! How can I help?<|im_end|>" in template
    assert whole.usage.prompt_tokens == len(
        llm_engine.renderer.tokenizer(template, add_special_tokens=False)["input_ids"]
    )
    done = await client.completions.create(
        model="chat", prompt="The capital of France is", max_tokens=6, temperature=0
    )
    assert done.usage.prompt_tokens == len(
        llm_engine.renderer.tokenizer("The capital of France is")["input_ids"]
    )
    assert done.choices[0].text and llm.requests[-1]["raw_prompt"] == "The capital of France is"


async def test_errors_are_openais_through_the_sdk(door):
    client = openai.AsyncOpenAI(base_url=door[0], api_key="none", max_retries=0)
    with pytest.raises(openai.BadRequestError) as bad:
        await client.chat.completions.create(model="chat", messages=PARIS, max_tokens=-5)
    assert (bad.value.status_code, bad.value.code, bad.value.type, bad.value.param) == (
        400,
        "invalid_value",
        "invalid_request_error",
        "max_tokens",
    )
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model="chat", messages=PARIS, n=2)
    assert refused.value.param == "n"
    with pytest.raises(openai.NotFoundError) as missing:
        await client.completions.create(model="nope", prompt="x")
    assert missing.value.code == "model_not_found" and "chat/llm" in missing.value.message
    huge = [{"role": "user", "content": "Paris is a city. " * 800}]  # ~4,000 tokens; the engine holds 2,048
    with pytest.raises(openai.BadRequestError) as overflow:
        await client.chat.completions.create(model="chat", messages=huge, max_tokens=8)
    assert (overflow.value.code, overflow.value.param) == ("context_length_exceeded", "messages")
    assert "context window of 2048 tokens" in overflow.value.message
    stream = await client.chat.completions.create(model="chat", messages=huge, max_tokens=8, stream=True)
    with pytest.raises(openai.APIError, match="context window"):
        async for _ in stream:
            pass
    after = await client.chat.completions.create(model="chat", messages=PARIS, max_tokens=4, temperature=0)
    assert after.choices[0].message.content  # the engine serves the next call


async def test_the_models_tool_call_comes_back_as_tool_calls_and_its_result_goes_back_in(door):
    url, llm = door
    client = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0)
    asked = await client.chat.completions.create(
        model="chat", messages=SHOTS + PARIS, tools=TOOLS, temperature=0, max_tokens=40
    )
    choice = asked.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message.content
    [call] = choice.message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
    stream = await client.chat.completions.create(
        model="chat", messages=SHOTS + PARIS, tools=TOOLS, temperature=0, max_tokens=40, stream=True
    )
    chunks = [c async for c in stream]
    deltas = [d for c in chunks if c.choices for d in (c.choices[0].delta.tool_calls or [])]
    assert [(d.function.name, d.function.arguments) for d in deltas] == [
        (call.function.name, call.function.arguments)
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert "<tool>" not in "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    history = (
        SHOTS
        + PARIS
        + [
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "14C, cloudy"},
        ]
    )
    answer = await client.chat.completions.create(
        model="chat", messages=history, tools=TOOLS, temperature=0, max_tokens=40
    )
    assert answer.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert answer.usage.prompt_tokens > asked.usage.prompt_tokens
    assert llm.requests[-1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": call.id,
        "content": "14C, cloudy",
    }
    rendered = llm.engine.renderer.tokenizer.decode(llm.engine.renderer.request_ids(llm.requests[-1]))
    assert "<result>14C, cloudy</result>" in rendered and '"city": "Paris"' in rendered


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")  # the API issue 59 names
async def test_langgraph_react_agent_with_two_tools_on_real_vllm(door):
    """Whatever the small model says: every exchange is OpenAI-shaped, the loop ends within its
    step limit, every tool the model calls is one of the two, and each tool's result reaches the
    next prompt."""
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    url, llm = door
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """The current weather of a city."""
        ran.append("get_weather")
        return f"14C and cloudy in {city}"

    @tool
    def get_population(city: str) -> str:
        """The population of a city."""
        ran.append("get_population")
        return f"2.1 million people live in {city}"

    model = ChatOpenAI(
        model="chat", base_url=url, api_key="none", temperature=0, max_tokens=40, max_retries=0
    )
    agent = create_react_agent(model, [get_weather, get_population])
    first = len(llm.requests)
    state = await agent.ainvoke({"messages": SHOTS + PARIS}, {"recursion_limit": 12})
    new = state["messages"][len(SHOTS) + 1 :]
    assert new and isinstance(new[-1], AIMessage) and not new[-1].tool_calls  # the loop ended on an answer
    calls = [c for m in new if isinstance(m, AIMessage) for c in m.tool_calls]
    assert {c["name"] for c in calls} <= {"get_weather", "get_population"} and len(ran) == len(calls)
    results = [m.content for m in new if isinstance(m, ToolMessage)]
    sent = [r["messages"] for r in llm.requests[first:]]
    assert len(sent) == sum(isinstance(m, AIMessage) for m in new) and all(
        r.get("tools") for r in llm.requests[first:]
    )
    for k, result in enumerate(results):  # each result is in every later prompt
        assert all(
            any(m["role"] == "tool" and m["content"] == result for m in later) for later in sent[k + 1 :]
        )


async def test_sampling_fields_and_json_object_reach_vllm(door):
    """top_p, penalties and a seed go to vLLM's sampling; response_format json_object is guided
    decoding: the answer starts as a JSON object whatever the model would have said."""
    client = openai.AsyncOpenAI(base_url=door[0], api_key="none", max_retries=0)
    answer = await client.chat.completions.create(
        model="chat",
        messages=[{"role": "user", "content": "Describe Paris."}],
        max_tokens=24,
        temperature=0,
        top_p=0.9,
        presence_penalty=0.5,
        frequency_penalty=0.5,
        seed=3,
        response_format={"type": "json_object"},
    )
    assert answer.choices[0].message.content.lstrip().startswith("{")
    sent = door[1].requests[-1]
    assert (sent["top_p"], sent["presence_penalty"], sent["json_object"]) == (0.9, 0.5, True)
