"""Logprobs through the OpenAI door (on a simulated engine that declares them as vLLM does:
tests/support/structured_sim.py): chat's logprobs / top_logprobs and a completion's logprobs reach
the engine request as one typed field and come back in OpenAI's shapes, whole and streamed; bad
values and an engine without logprobs are a 400 naming the field."""

from __future__ import annotations

import openai
import pytest

from tests.support.structured_sim import StructuredSim
from tests.unit.server.test_openai_door import serve

USER = [{"role": "user", "content": "Name a fruit."}]


def client(http) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url="http://teola.test/v1", api_key="none", http_client=http, max_retries=0
    )


async def test_chat_logprobs_whole_and_streamed():
    async with serve(engine=StructuredSim("llm")) as (http, _, llm):
        sdk = client(http)
        answer = await sdk.chat.completions.create(
            model="agent", messages=USER, logprobs=True, top_logprobs=2
        )
        content = answer.choices[0].logprobs.content
        assert llm.requests[-1]["logprobs"] == 2
        assert "".join(t.token for t in content) == answer.choices[0].message.content
        assert all(len(t.top_logprobs) == 2 and t.top_logprobs[0].token == t.token for t in content)
        assert content[0].bytes == list(content[0].token.encode()) and content[0].logprob < 0
        stream = await sdk.chat.completions.create(model="agent", messages=USER, logprobs=True, stream=True)
        chunks = [c async for c in stream]
        streamed = [
            t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content
        ]
        assert "".join(t.token for t in streamed) == answer.choices[0].message.content
        assert llm.requests[-1]["logprobs"] == 0 and all(t.top_logprobs == [] for t in streamed)
        plain = await sdk.chat.completions.create(model="agent", messages=USER, logprobs=False)
        assert plain.choices[0].logprobs is None and llm.requests[-1].get("logprobs") is None


async def test_completion_logprobs_in_the_legacy_shape():
    async with serve(engine=StructuredSim("llm")) as (http, _, _llm):
        done = await client(http).completions.create(model="agent", prompt="Say hi.", logprobs=1)
        lp = done.choices[0].logprobs
        assert "".join(lp.tokens) == done.choices[0].text and len(lp.token_logprobs) == len(lp.tokens)
        assert lp.text_offset[0] == 0 and lp.text_offset[1] == len(lp.tokens[0])
        assert [list(t) for t in lp.top_logprobs] == [[tok] for tok in lp.tokens]


@pytest.mark.parametrize(
    "path, extra, param",
    [
        ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ("/v1/chat/completions", {"top_logprobs": 2}, "top_logprobs"),
        ("/v1/chat/completions", {"logprobs": 3}, "logprobs"),
        ("/v1/completions", {"logprobs": True}, "logprobs"),
        ("/v1/completions", {"logprobs": -1}, "logprobs"),
    ],
)
async def test_bad_logprobs_name_the_field(path, extra, param):
    async with serve(engine=StructuredSim("llm")) as (http, _, llm):
        prompt = {"messages": USER} if "chat" in path else {"prompt": "Hi."}
        r = await http.post(path, json={"model": "agent", **prompt, **extra})
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
        assert not llm.requests


async def test_an_engine_without_logprobs_refuses_naming_them():
    async with serve() as (http, _, llm):
        r = await http.post(
            "/v1/chat/completions", json={"model": "agent", "messages": USER, "logprobs": True}
        )
        assert r.status_code == 400 and r.json()["error"]["param"] == "logprobs"
        assert "needs logprobs, which engine 'llm'" in r.json()["error"]["message"] and not llm.requests
