"""The OpenAI door answers like OpenAI's API (on the deterministic simulated engine): the official
client sees OpenAI's error classes with code, type and param; every request field is honoured
(reaching the engine request) or refused with a 400 naming it; a conversation reaches the engine
whole, a completion prompt raw; finish_reason is the engine's. The rest of the server keeps
teola's own error shape."""

from __future__ import annotations

import openai
import pytest

from teola.server import ServerSettings
from tests.support.structured_sim import StructuredSim
from tests.unit.server.test_openai_door import serve

USER = [{"role": "user", "content": "Name a fruit."}]


def client(http) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url="http://teola.test/v1", api_key="none", http_client=http, max_retries=0
    )


async def test_the_sdk_sees_openai_errors_with_code_type_and_param():
    async with serve() as (http, _, _llm):
        sdk = client(http)
        with pytest.raises(openai.BadRequestError) as bad:
            await sdk.chat.completions.create(model="agent", messages=USER, max_tokens=-5)
        assert (bad.value.code, bad.value.type, bad.value.param) == (
            "invalid_value",
            "invalid_request_error",
            "max_tokens",
        )
        assert "-5" in bad.value.message
        with pytest.raises(openai.NotFoundError) as missing:
            await sdk.chat.completions.create(model="nope", messages=USER)
        assert (missing.value.code, missing.value.param) == ("model_not_found", "model")
        with pytest.raises(openai.BadRequestError) as refused:
            await sdk.chat.completions.create(model="agent", messages=USER, logit_bias={"42": 5})
        assert (refused.value.code, refused.value.param) == ("unsupported_parameter", "logit_bias")
        with pytest.raises(openai.BadRequestError) as role:
            await sdk.chat.completions.create(model="agent", messages=[{"role": "wizard", "content": "x"}])
        assert role.value.param == "messages[0]"
        # the rest of the server keeps teola's shape
        elsewhere = await http.post("/v1/apps/nope/query", json={"query": {"question": "x"}})
        assert elsewhere.status_code == 404 and elsewhere.json()["error"] == "unknown_app"


async def test_wrong_key_and_malformed_body_are_openai_errors_on_the_door_only():
    async with serve(ServerSettings(api_key="secret")) as (http, _, _llm):
        with pytest.raises(openai.AuthenticationError) as denied:
            await openai.AsyncOpenAI(
                base_url="http://teola.test/v1", api_key="wrong", http_client=http, max_retries=0
            ).models.list()
        assert denied.value.type == "authentication_error" and denied.value.code == "unauthorized"
        malformed = await http.post(
            "/v1/completions",
            content=b"{nope",
            headers={"authorization": "Bearer secret", "content-type": "application/json"},
        )
        assert malformed.status_code == 400 and malformed.json()["error"]["type"] == "invalid_request_error"
        teola = await http.get("/v1/apps")
        assert teola.status_code == 401 and teola.json()["error"] == "unauthorized"


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 3}, "top_logprobs"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}},
            "response_format",
        ),
        (
            {"tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f"}}]},
            "tool_choice",
        ),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"top_p": 0}, "top_p"),
        ({"presence_penalty": 3}, "presence_penalty"),
        ({"store": True}, "store"),
    ],
)
async def test_fields_that_cannot_be_honoured_are_refused_by_name(extra, param):
    async with serve() as (http, _, llm):
        r = await http.post("/v1/chat/completions", json={"model": "agent", "messages": USER, **extra})
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
        assert not llm.requests, "a refused request reaches no engine"


async def test_honoured_fields_reach_the_engine_request():
    async with serve(engine=StructuredSim("llm")) as (http, _, llm):
        sdk = client(http)
        await sdk.chat.completions.create(
            model="agent",
            messages=USER,
            top_p=0.5,
            stop=["\n"],
            seed=7,
            n=1,
            presence_penalty=0.5,
            frequency_penalty=-0.5,
            max_completion_tokens=9,
            response_format={"type": "json_object"},
            logprobs=False,
            temperature=0,
        )
        sent = llm.requests[-1]
        assert (sent["top_p"], sent["stop"], sent["seed"], sent["max_tokens"], sent["temperature"]) == (
            0.5,
            ["\n"],
            7,
            9,
            0,
        )
        assert (sent["presence_penalty"], sent["frequency_penalty"], sent["json_object"]) == (0.5, -0.5, True)
        assert sent["messages"] == USER and "tools" not in sent and "raw_prompt" not in sent


async def test_a_conversation_reaches_the_engine_whole_and_a_completion_prompt_raw():
    conversation = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "Hi."},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": [{"type": "text", "text": "Name a fruit."}]},
    ]
    async with serve() as (http, _, llm):
        sdk = client(http)
        await sdk.chat.completions.create(model="agent", messages=conversation)
        assert llm.requests[-1]["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi."},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "Name a fruit."},
        ]
        await sdk.completions.create(model="agent", prompt="Once upon a time")
        assert llm.requests[-1]["raw_prompt"] == "Once upon a time" and "messages" not in llm.requests[-1]


async def test_finish_reason_is_the_engines():
    async with serve() as (http, _, llm):
        sdk = client(http)
        free = await sdk.chat.completions.create(model="agent", messages=USER, max_tokens=50)
        capped = await sdk.chat.completions.create(
            model="agent", messages=USER, max_tokens=50, extra_body={"ignore_eos": True}
        )
        decoded = [
            (await llm.engine.execute("decoding", [dict(r)]))[0]["finish_reason"] for r in llm.requests
        ]
        assert (
            [free.choices[0].finish_reason, capped.choices[0].finish_reason] == decoded == ["stop", "length"]
        )
