"""LlamaIndex's own OpenAI-compatible classes against teola's OpenAI door on real engines (uvicorn on
loopback; in-process vLLM with SmolLM2-135M and sentence-transformers MiniLM on CPU): `OpenAILike`
completes (chat and plain completions), chats, streams, extracts a pydantic object (its
function-calling program forces the tool) and calls a forced tool; `OpenAIEmbedding` gets the
engine's own vectors from /v1/embeddings.

The assertions hold whatever the 135M model says: a forced call is decoded under the tool's schema,
a stream's deltas add up to its message, embeddings are compared with the engine's."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tests.integration.test_openai_door_surface_vllm import door  # noqa: F401  (the module's served app)

pytest.importorskip("llama_index.llms.openai_like", reason="the optional 'llamaindex' extra is not installed")
pytestmark = pytest.mark.engines


class City(BaseModel):
    """A city and the country it is in."""

    name: str
    country: str


def openai_like(url: str, chat: bool = True, max_tokens: int = 16):
    """LlamaIndex's OpenAI-compatible LLM on the door (a forced call needs room for its whole JSON:
    one cut short by max_tokens comes back as text)."""
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(
        model="chat",
        api_base=url,
        api_key="none",
        is_chat_model=chat,
        is_function_calling_model=True,
        context_window=2048,
        temperature=0,
        max_tokens=max_tokens,
        max_retries=0,
    )


async def test_openai_like_completes_chats_and_streams(door):  # noqa: F811
    from llama_index.core.llms import ChatMessage

    url, llm, _ = door
    done = await openai_like(url, chat=False).acomplete("The capital of France is")
    assert done.text and llm.requests[-1]["max_tokens"] == 16 and "messages" not in llm.requests[-1]
    chatted = await openai_like(url).acomplete("What is the capital of France?")
    assert chatted.text and llm.requests[-1]["messages"][-1]["content"] == "What is the capital of France?"
    messages = [
        ChatMessage(role="system", content="Answer briefly."),
        ChatMessage(role="user", content="Name a fruit."),
    ]
    answer = await openai_like(url).achat(messages)
    assert answer.message.role == "assistant" and answer.message.content
    assert [m["role"] for m in llm.requests[-1]["messages"]] == ["system", "user"]
    deltas = [r async for r in await openai_like(url).astream_chat(messages)]
    assert len(deltas) > 1 and deltas[-1].message.content == "".join(r.delta or "" for r in deltas)
    assert deltas[-1].message.content == answer.message.content  # greedy: the same answer streamed


async def test_openai_like_structured_prediction_and_a_forced_tool(door):  # noqa: F811
    from llama_index.core.prompts import PromptTemplate
    from llama_index.core.tools import FunctionTool

    url, llm, _ = door
    prompt = PromptTemplate("Name the capital of {country}.")
    city = await openai_like(url, max_tokens=60).astructured_predict(City, prompt, country="France")
    assert isinstance(city, City) and llm.requests[-1]["json_schema"]["required"] == ["name", "country"]

    def get_weather(city: str) -> str:
        """The current weather of a city."""
        return f"14C and cloudy in {city}"

    tool = FunctionTool.from_defaults(fn=get_weather)
    model = openai_like(url, max_tokens=40)
    response = await model.achat_with_tools([tool], user_msg="Weather in Paris?", tool_required=True)
    [call] = model.get_tool_calls_from_response(response)
    assert call.tool_name == "get_weather" and isinstance(call.tool_kwargs["city"], str)
    assert tool(**call.tool_kwargs).content == f"14C and cloudy in {call.tool_kwargs['city']}"
    assert llm.requests[-1]["json_schema"]["required"] == ["city"]


async def test_openai_embedding_through_the_door_equals_the_engines(door, embedding_engine):  # noqa: F811
    from llama_index.embeddings.openai import OpenAIEmbedding

    url, _, emb = door
    texts = ["The Eiffel Tower is in Paris.", "Bananas are yellow.", "Paris is the capital of France."]
    model = OpenAIEmbedding(model_name="chat/embedding", api_base=url, api_key="none", max_retries=0)
    vectors = await model.aget_text_embedding_batch(texts)
    query = await model.aget_query_embedding(texts[0])
    direct = await embedding_engine.execute("embedding", [{"text": t} for t in texts])
    assert len(vectors) == 3 and len(vectors[0]) == 384
    for got, want in zip(vectors + [query], direct + direct[:1]):
        assert sum(a * b for a, b in zip(got, want)) == pytest.approx(1.0, abs=1e-4)
    assert [r["text"] for r in emb.requests[-4:]] == texts + texts[:1]
