"""The OpenAI door's remaining surface on real engines (uvicorn on loopback; in-process vLLM with
SmolLM2-135M and sentence-transformers MiniLM on CPU; no mock on either side): the first streamed
chunk carries the first token; structured outputs through vLLM (response_format json_schema and
json_object, tool_choice forcing a call) with LangChain's `with_structured_output` (both methods)
and a LangGraph agent whose first step forces a tool; logprobs through the official client; and
`/v1/embeddings` through LangChain's `OpenAIEmbeddings`, equal to the engine's own vectors.

A 135M model's words are weak, so the assertions hold whatever it says: structured outputs make
the answer parse under the schema (the decode is constrained), greedy logprobs put the chosen token
first, and embeddings are compared with the engine's."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from typing import Any, TypedDict

import openai
import pytest
import pytest_asyncio
from pydantic import BaseModel

from bench.lib.results import served_here
from teola import App, Engine, Node
from teola.server import ServerSettings, create_server
from tests.support.borrowed import Borrowed

pytestmark = pytest.mark.engines

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


class City(BaseModel):
    """A city and the country it is in."""

    name: str
    country: str


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def door(llm_engine, embedding_engine) -> AsyncIterator[tuple[str, Borrowed, Borrowed]]:
    """teola serving an app on the session's vLLM and embedding engines: (base url, llm, embedding)."""
    app = App("chat")
    llm, emb = Borrowed(llm_engine), Borrowed(embedding_engine)
    app.register_engine(Engine("llm", kind="vllm"), backend=llm)
    app.register_engine(
        Engine("embedding", kind="sentence_transformers", model="all-minilm-l6-v2"), backend=emb
    )
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
        yield f"{url}/v1", llm, emb


def sdk(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0)


def chat_model(url: str, **kw: Any) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model="chat", base_url=url, api_key="none", temperature=0, max_tokens=60, max_retries=0, **kw
    )


async def test_the_first_streamed_chunk_carries_the_first_token(door):
    import httpx

    async with httpx.AsyncClient(timeout=60) as http:
        async with http.stream(
            "POST",
            f"{door[0]}/chat/completions",
            json={"model": "chat", "messages": QUESTION, "max_tokens": 8, "temperature": 0, "stream": True},
        ) as r:
            first = await anext(line async for line in r.aiter_lines() if line.startswith("data:"))
    delta = json.loads(first.removeprefix("data: "))["choices"][0]["delta"]
    assert delta["role"] == "assistant" and delta["content"]


async def test_json_schema_and_json_object_are_decoded_under_vllms_structured_outputs(door):
    url, llm, _ = door
    answer = await sdk(url).chat.completions.parse(
        model="chat", messages=QUESTION, response_format=City, max_tokens=60, temperature=0
    )
    assert isinstance(answer.choices[0].message.parsed, City), answer.choices[0].message.content
    assert llm.requests[-1]["json_schema"]["required"] == ["name", "country"]
    plain = await sdk(url).chat.completions.create(
        model="chat", messages=QUESTION, max_tokens=60, temperature=0, response_format={"type": "json_object"}
    )
    # one JSON object, unbounded: the small model may still be adding keys at max_tokens
    text = plain.choices[0].message.content
    assert text.startswith("{") and (
        plain.choices[0].finish_reason == "length" or isinstance(json.loads(text), dict)
    )


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
async def test_langchain_with_structured_output(door, method):
    url, llm, _ = door
    city = (
        await chat_model(url)
        .with_structured_output(City, method=method)
        .ainvoke("Name the capital of France.")
    )
    assert isinstance(city, City)
    assert llm.requests[-1]["json_schema"]["properties"].keys() == {"name", "country"}
    if method == "function_calling":
        assert [t["function"]["name"] for t in llm.requests[-1]["tools"]] == ["City"]


async def test_forced_tool_calls_whole_and_streamed(door):
    url, _, _ = door
    named = {"type": "function", "function": {"name": "get_weather"}}
    answer = await sdk(url).chat.completions.create(
        model="chat",
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[WEATHER],
        tool_choice=named,
        max_tokens=40,
        temperature=0,
    )
    [call] = answer.choices[0].message.tool_calls
    assert answer.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments)["city"], str)
    stream = await sdk(url).chat.completions.create(
        model="chat",
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[WEATHER],
        tool_choice="required",
        max_tokens=40,
        temperature=0,
        stream=True,
    )
    chunks = [c async for c in stream]
    [delta] = [d for c in chunks if c.choices for d in (c.choices[0].delta.tool_calls or [])]
    assert delta.function.name == "get_weather" and chunks[-1].choices[0].finish_reason == "tool_calls"


class Trip(TypedDict, total=False):
    messages: list


async def test_a_langgraph_agent_with_a_forced_tool(door):
    """ask (tool_choice forces get_weather) -> the tool runs -> answer (no tools): the forced call
    always comes, so the graph always reaches the tool and ends on an answer."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, StateGraph
    from langgraph.prebuilt import ToolNode

    url, llm, _ = door
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """The current weather of a city."""
        ran.append(city)
        return f"14C and cloudy in {city}"

    forced = chat_model(url).bind_tools([get_weather], tool_choice="get_weather")
    writer = chat_model(url)

    async def ask(state: Trip) -> Trip:
        return {"messages": state["messages"] + [await forced.ainvoke(state["messages"])]}

    async def run_tool(state: Trip) -> Trip:
        out = await ToolNode([get_weather]).ainvoke({"messages": state["messages"]})
        return {"messages": state["messages"] + out["messages"]}

    async def answer(state: Trip) -> Trip:
        return {"messages": state["messages"] + [await writer.ainvoke(state["messages"])]}

    graph = StateGraph(Trip)
    for name, step in (("ask", ask), ("tool", run_tool), ("answer", answer)):
        graph.add_node(name, step)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "tool")
    graph.add_edge("tool", "answer")
    graph.add_edge("answer", END)
    state = await graph.compile().ainvoke({"messages": [HumanMessage("What is the weather in Paris?")]})
    asked, result, final = state["messages"][1:]
    assert isinstance(asked, AIMessage) and [c["name"] for c in asked.tool_calls] == ["get_weather"]
    assert (
        isinstance(result, ToolMessage) and len(ran) == 1 and result.content == f"14C and cloudy in {ran[0]}"
    )
    assert isinstance(final, AIMessage) and final.content
    assert llm.requests[-1]["messages"][-1]["role"] == "tool" and "json_schema" not in llm.requests[-1]


async def test_logprobs_through_the_official_client(door):
    url, llm, _ = door
    answer = await sdk(url).chat.completions.create(
        model="chat", messages=QUESTION, max_tokens=12, temperature=0, logprobs=True, top_logprobs=3
    )
    tokens = answer.choices[0].logprobs.content
    # the end-of-turn token is counted in usage but, like the text, not listed
    assert llm.requests[-1]["logprobs"] == 3 and len(tokens) in {
        answer.usage.completion_tokens,
        answer.usage.completion_tokens - 1,
    }
    assert "".join(t.token for t in tokens) == answer.choices[0].message.content
    for t in tokens:  # greedy: the chosen token is the most likely one
        assert len(t.top_logprobs) == 3 and t.top_logprobs[0].token == t.token and t.logprob <= 0
        assert t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob
    stream = await sdk(url).chat.completions.create(
        model="chat", messages=QUESTION, max_tokens=12, temperature=0, logprobs=True, stream=True
    )
    streamed = [
        t
        for c in [c async for c in stream]
        if c.choices and c.choices[0].logprobs
        for t in c.choices[0].logprobs.content
    ]
    assert [t.token for t in streamed] == [t.token for t in tokens]
    assert all(math.isclose(a.logprob, b.logprob, abs_tol=1e-3) for a, b in zip(streamed, tokens))
    done = await sdk(url).completions.create(
        model="chat", prompt="The capital of France is", max_tokens=6, temperature=0, logprobs=2
    )
    assert "".join(done.choices[0].logprobs.tokens) == done.choices[0].text


async def test_openai_embeddings_through_the_door_equal_the_engines(door, embedding_engine):
    from langchain_openai import OpenAIEmbeddings

    url, _, emb = door
    texts = ["The Eiffel Tower is in Paris.", "Bananas are yellow.", "Paris is the capital of France."]
    model = OpenAIEmbeddings(
        model="chat/embedding", base_url=url, api_key="none", check_embedding_ctx_length=False, max_retries=0
    )
    vectors = await model.aembed_documents(texts)
    direct = await embedding_engine.execute("embedding", [{"text": t} for t in texts])
    assert len(vectors) == 3 and len(vectors[0]) == 384
    for got, want in zip(vectors, direct):
        assert sum(a * b for a, b in zip(got, want)) == pytest.approx(1.0, abs=1e-4)
    answer = await sdk(url).embeddings.create(model="chat/embedding", input=texts[0])
    assert answer.usage.prompt_tokens == minilm_tokens(texts[0]) > 0
    assert [r["text"] for r in emb.requests[-4:]] == texts + texts[:1]


def minilm_tokens(text: str) -> int:
    from engines.registry import kind_tokenizer_dir
    from teola.compile.chunk_tokenizer import load_tokenizer

    return load_tokenizer(kind_tokenizer_dir("sentence_transformers", {"model": "all-minilm-l6-v2"})).count(
        text
    )
