"""The OpenAI door answers every bad or odd request in OpenAI's error shape, never Starlette's
plain-text 500: a program id that is not Latin-1, JSON nested too deeply, tool_calls that are not
a list, several Authorization headers, too many stop sequences, and an unforeseen failure (the
server's generic handler, teola.server.errors)."""

from __future__ import annotations

import json
from urllib.parse import unquote

import httpx
import pytest

import teola.server.openai.format as fmt
from teola.server import ServerSettings, create_server
from tests.unit.server.test_openai_door import door_app, serve

USER = [{"role": "user", "content": "Name a fruit."}]
CHAT = {"model": "agent", "messages": USER, "max_tokens": 4}


def openai_error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert set(body) == {"error"} and {"message", "type", "param", "code"} <= set(body["error"]), body
    return body["error"]


async def test_a_program_id_that_is_not_latin1_is_answered_with_the_header_percent_encoded():
    async with serve() as (http, _, llm):
        r = await http.post("/v1/chat/completions", json={**CHAT, "user": "Zoë"})
        assert r.status_code == 200, r.text
        assert unquote(r.headers["x-teola-program"]) == "default/Zoë"
        streamed = await http.post("/v1/chat/completions", json={**CHAT, "user": "Zoë ☃", "stream": True})
        assert streamed.status_code == 200 and "[DONE]" in streamed.text
        assert unquote(streamed.headers["x-teola-program"]) == "default/Zoë ☃"


@pytest.mark.parametrize(
    "body, param",
    [
        (
            {**CHAT, "messages": [*USER, {"role": "assistant", "content": "", "tool_calls": 5}]},
            "messages[1].tool_calls",
        ),
        (
            {**CHAT, "messages": [*USER, {"role": "assistant", "content": "", "tool_calls": "call"}]},
            "messages[1].tool_calls",
        ),
        ({**CHAT, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({**CHAT, "stop": ["x" * 100_000]}, "stop"),
    ],
)
async def test_malformed_fields_are_a_400_naming_them(body, param):
    async with serve() as (http, _, llm):
        error = openai_error(await http.post("/v1/chat/completions", json=body), 400)
        assert error["param"] == param, error
        assert not llm.requests


async def test_json_nested_too_deeply_is_a_400_in_openai_shape():
    async with serve() as (http, _, llm):
        deep = b'{"model": "agent", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        error = openai_error(
            await http.post(
                "/v1/chat/completions", content=deep, headers={"content-type": "application/json"}
            ),
            400,
        )
        assert "nested" in error["message"]


async def test_several_authorization_headers_are_a_400_in_openai_shape():
    async with serve(ServerSettings(api_key="secret")) as (http, _, llm):
        request = http.build_request("POST", "/v1/chat/completions", json=CHAT)
        request.headers = httpx.Headers(
            [
                *request.headers.multi_items(),
                ("authorization", "Bearer secret"),
                ("authorization", "Bearer other"),
            ]
        )
        error = openai_error(await http.send(request), 400)
        assert "Authorization" in error["message"]
        assert not llm.requests


async def test_an_unforeseen_failure_is_a_500_in_the_paths_error_shape(monkeypatch):
    def broken(messages):
        raise RuntimeError("a bug nobody foresaw")

    monkeypatch.setattr(fmt, "chat_parts", broken)
    app, llm = door_app()
    await llm.engine.start()
    server = create_server({"agent": app}, ServerSettings(documents="memory"))
    async with server.router.lifespan_context(server):
        transport = httpx.ASGITransport(app=server, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://teola.test") as http:
            error = openai_error(await http.post("/v1/chat/completions", json=CHAT), 500)
            assert error["type"] == "server_error" and "a bug nobody foresaw" in error["message"]
            monkeypatch.setattr(app, "compile", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
            r = await http.get("/v1/apps/agent/graph")
            assert r.status_code == 500 and json.loads(r.text)["error"] == "internal_error", r.text
