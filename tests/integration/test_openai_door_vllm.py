"""The official `openai` client -> teola's OpenAI-compatible door (uvicorn on loopback) -> teola's
engine scheduler -> the remote engine -> a real `vllm serve`: greedy answers streamed and not are
the same text, token by token in several chunks, with usage; response_format json_schema, a forced
tool call and logprobs pass through to the server's structured outputs and logprobs."""

import json

import openai
import pytest

from bench.lib.results import served_here
from teola import App, Engine, Node
from teola.server import ServerSettings, create_server
from tests.support.borrowed import Borrowed

pytestmark = pytest.mark.engines


async def test_openai_client_through_the_door_to_vllm_serve(remote_llm, vllm_server):
    app = App("chat", config={"runtime": {"policy": "atlas"}})
    llm = Borrowed(remote_llm)
    app.register_engine(Engine("llm", kind="openai", url=vllm_server), backend=llm)
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
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none")
        messages = [{"role": "user", "content": "What is the capital of France?"}]
        whole = await client.chat.completions.create(
            model="chat", messages=messages, max_tokens=24, temperature=0, user="session-1"
        )
        stream = await client.chat.completions.create(
            model="chat",
            messages=messages,
            max_tokens=24,
            temperature=0,
            user="session-1",
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
        pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
        assert whole.choices[0].message.content and "".join(pieces) == whole.choices[0].message.content
        assert len(pieces) > 1 and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
        assert (
            whole.usage.prompt_tokens
            == remote_llm.prompt_token_ids([["user", messages[0]["content"]]]).__len__()
        )
        assert (
            chunks[-1].usage.prompt_tokens_details.cached_tokens > 0
        )  # the same prompt, cached by vllm serve
        assert [r["owner"] for r in llm.requests] == ["default/session-1"] * 2


async def test_structured_outputs_and_logprobs_pass_through_to_vllm_serve(remote_llm, vllm_server):
    from engines.protocol import Feature

    assert remote_llm.profile.features == {Feature.STRUCTURED_OUTPUTS, Feature.LOGPROBS}
    app = App("chat")
    app.register_engine(Engine("llm", kind="openai", url=vllm_server), backend=Borrowed(remote_llm))
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
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "country": {"type": "string"}},
        "required": ["name", "country"],
    }
    async with served_here(create_server({"chat": app}, ServerSettings())) as url:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
        messages = [{"role": "user", "content": "What is the capital of France?"}]
        city = await client.chat.completions.create(
            model="chat",
            messages=messages,
            max_tokens=60,
            temperature=0,
            response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema}},
        )
        assert set(json.loads(city.choices[0].message.content)) == {"name", "country"}
        weather = {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
        forced = await client.chat.completions.create(
            model="chat",
            messages=messages,
            tools=[weather],
            max_tokens=40,
            tool_choice="required",
            temperature=0,
        )
        [call] = forced.choices[0].message.tool_calls
        assert call.function.name == "get_weather" and "city" in json.loads(call.function.arguments)
        scored = await client.chat.completions.create(
            model="chat", messages=messages, max_tokens=8, temperature=0, logprobs=True, top_logprobs=2
        )
        tokens = scored.choices[0].logprobs.content
        assert "".join(t.token for t in tokens) == scored.choices[0].message.content
        assert all(t.top_logprobs[0].token == t.token and len(t.top_logprobs) == 2 for t in tokens)
