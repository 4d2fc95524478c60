"""The OpenAI-compatible door on deterministic in-process engines: the official `openai` client,
streaming and not, program ids and parents reaching the ATLAS policy, program ends, tenants, and
clear errors for bad requests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import openai
import pytest

from engines.sim.sim_engine import SimEngine
from teola import App, Engine, Node
from teola.server import ServerSettings, create_server
from tests.support.borrowed import Borrowed
from tests.support.waiting import until


def door_app(policy: str = "atlas", engine: SimEngine | None = None) -> tuple[App, Borrowed]:
    options = {
        "base_quantum": 1,
        "service": "tokens",
        **({"critical_path": "parents"} if policy == "atlas" else {}),
    }
    app = App("agent", config={"runtime": {"policy": policy, "policy_options": {policy: options}}})
    llm = Borrowed(engine or SimEngine("llm"))
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
    return app, llm


@asynccontextmanager
async def serve(
    settings: ServerSettings | None = None, engine: SimEngine | None = None, telemetry: object = None
) -> AsyncIterator[tuple[httpx.AsyncClient, App, Borrowed]]:
    app, llm = door_app(engine=engine)
    app.telemetry = telemetry
    await llm.engine.start()
    server = create_server({"agent": app}, settings or ServerSettings())
    async with server.router.lifespan_context(server):
        transport = httpx.ASGITransport(app=server)
        async with httpx.AsyncClient(transport=transport, base_url="http://teola.test", timeout=30) as http:
            yield http, app, llm


async def test_openai_client_chat_and_completion_not_streaming():
    async with serve() as (http, _, llm):
        client = openai.AsyncOpenAI(base_url="http://teola.test/v1", api_key="none", http_client=http)
        chat = await client.chat.completions.create(
            model="agent",
            max_tokens=8,
            temperature=0,
            extra_body={"ignore_eos": True},
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Name a fruit."},
            ],
        )
        assert chat.choices[0].message.role == "assistant" and chat.choices[0].message.content
        expected = (await llm.engine.execute("decoding", [dict(llm.requests[-1])]))[0]
        assert chat.choices[0].message.content == expected["text"] and llm.requests[-1]["max_tokens"] == 8
        assert chat.usage.completion_tokens == expected["num_output_tokens"] > 0
        assert llm.requests[-1]["parts"] == [["system", "Be brief."], ["user", "Name a fruit."]]
        done = await client.completions.create(
            model="agent/llm", prompt="Say hi.", max_tokens=4, temperature=0, extra_body={"ignore_eos": True}
        )
        assert done.choices[0].text and llm.requests[-1]["max_tokens"] == 4
        models = await client.models.list()
        assert [m.id for m in models.data] == ["agent/llm"]


async def test_openai_client_streams_chunks_with_usage():
    async with serve() as (http, _, llm):
        client = openai.AsyncOpenAI(base_url="http://teola.test/v1", api_key="none", http_client=http)
        stream = await client.chat.completions.create(
            model="agent",
            max_tokens=8,
            stream=True,
            extra_body={"ignore_eos": True},
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "Name a fruit."}],
        )
        chunks = [c async for c in stream]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert llm.requests[-1]["stream_text"] is True
        assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1, (
            "text arrives in pieces"
        )
        assert text == (await llm.engine.execute("decoding", [dict(llm.requests[-1])]))[0]["text"]
        assert chunks[-2].choices[0].finish_reason in ("stop", "length")
        assert chunks[-1].usage.completion_tokens == len(text.split()) and not chunks[-1].choices


async def test_program_calls_reach_the_atlas_policy():
    async with serve() as (http, app, llm):
        table = app.runtime.schedulers["llm"].policy.table
        root = await http.post(
            "/v1/chat/completions",
            headers={"x-teola-program": "trip", "x-teola-parent": ""},
            json={
                "model": "agent",
                "max_tokens": 8,
                "ignore_eos": True,
                "messages": [{"role": "user", "content": "Plan."}],
            },
        )
        assert root.status_code == 200, root.text
        pid = root.headers["x-teola-program"]
        assert pid == "default/trip" and root.json()["id"] == root.headers["x-teola-call"]
        child = await http.post(
            "/v1/chat/completions",
            headers={"x-teola-parent": root.json()["id"]},
            json={
                "model": "agent",
                "max_tokens": 4,
                "user": "trip",
                "ignore_eos": True,
                "messages": [{"role": "user", "content": "Step one."}],
            },
        )
        sibling = await http.post(
            "/v1/chat/completions",
            headers={"x-teola-parent": root.json()["id"], "x-teola-program": "trip"},
            json={
                "model": "agent",
                "max_tokens": 8,
                "messages": [{"role": "user", "content": "Step two: list every fruit you know."}],
            },
        )
        assert child.status_code == 200 and sibling.status_code == 200, child.text + sibling.text
        entry = table.get(pid)
        r, c, s = (x.json()["usage"]["completion_tokens"] for x in (root, child, sibling))
        assert entry.completed == 3 and min(r, c, s) > 0
        # ATLAS charges decoded tokens along the critical path: child and sibling both hang off the
        # root, so the path is root + the longer of the two, not the sum of all three
        assert (entry.service, entry.critical_path) == (r + c + s, r + max(c, s))
        # the root is a new program (queue 0); the child inherits the root's critical path, a
        # lower queue (1-token quanta), sent to the engine as its priority
        assert llm.requests[0]["priority"] == 0 and llm.requests[1]["priority"] >= 1
        assert llm.requests[2]["priority"] == llm.requests[1]["priority"]
        end = await http.post(
            "/v1/completions",
            headers={"x-teola-program": "trip", "x-teola-program-end": "true"},
            json={"model": "agent", "max_tokens": 2, "prompt": "Done."},
        )
        assert end.status_code == 200 and pid not in table


async def test_idle_programs_end_on_their_own():
    async with serve(ServerSettings(program_idle_timeout=0.05)) as (http, app, _):
        table = app.runtime.schedulers["llm"].policy.table
        r = await http.post(
            "/v1/completions",
            headers={"x-teola-program": "idle"},
            json={"model": "agent", "max_tokens": 2, "prompt": "Hi."},
        )
        assert r.status_code == 200 and "default/idle" in table
        await until(lambda: "default/idle" not in table)


async def test_tenants_need_keys_and_get_their_own_salt_and_programs():
    settings = ServerSettings(api_keys="alice:ka;bob:kb")
    async with serve(settings) as (http, _, llm):
        body = {"model": "agent", "max_tokens": 2, "prompt": "Hi."}
        assert (await http.post("/v1/completions", json=body)).status_code == 401
        a = await http.post(
            "/v1/completions", json=body, headers={"authorization": "Bearer ka", "x-teola-program": "p"}
        )
        b = await http.post(
            "/v1/completions", json=body, headers={"authorization": "Bearer kb", "x-teola-program": "p"}
        )
        assert (a.headers["x-teola-program"], b.headers["x-teola-program"]) == ("alice/p", "bob/p")
        salts = [r["cache_salt"] for r in llm.requests[-2:]]
        assert salts[0] != salts[1] and all(salts)


@pytest.mark.parametrize(
    "body, status, param, words",
    [
        ({"model": "nope", "prompt": "x"}, 404, "model", "agent/llm"),
        ({"model": "agent", "prompt": ""}, 400, "prompt", "prompt"),
        ({"model": "agent", "prompt": "x", "max_tokens": 0}, 400, "max_tokens", "max_tokens"),
        ({"model": "agent", "prompt": "x", "n": 2}, 400, "n", "n=2"),
        ({"model": "agent", "prompt": "x", "temperature": 5}, 400, "temperature", "temperature"),
    ],
)
async def test_bad_requests_name_the_problem(body, status, param, words):
    async with serve() as (http, _, _llm):
        r = await http.post("/v1/completions", json=body)
        error = r.json()["error"]
        assert r.status_code == status and error["param"] == param and words in error["message"]
        assert error["type"] == "invalid_request_error" and error["code"]
