"""A tenant is charged the LLM tokens it spent however its request ended (teola.server.quotas):
a query that gets its 504 or whose client hangs up, and an OpenAI-door stream closed after its
last token, count against ``tenant_tokens_per_minute`` as an answered one does."""

from __future__ import annotations

import asyncio
from typing import Any

from engines.sim.sim_engine import SimEngine
from teola import App, Engine, Node
from teola.server import ServerSettings, create_server
from tests.support.http import post_and_hang_up
from tests.support.waiting import until
from tests.unit.server.test_server import HANG, make_echo_app, serve


class StallsAtTheEnd(SimEngine):
    """A sim LLM that streams every piece of its answer, then holds the answer itself back until
    `release` is set (a call cut short right after its last token)."""

    def __init__(self) -> None:
        super().__init__("llm", serial=False)
        self.release = asyncio.Event()
        self.stalled = 0

    async def stream(self, op: str, requests: list[dict[str, Any]]):
        async for event in super().stream(op, requests):
            if event[1] == "final" and not self.release.is_set():
                self.stalled += 1
                await self.release.wait()
            yield event


def stalling_app() -> tuple[App, StallsAtTheEnd]:
    app = App("agent", config={"runtime": {"policy": "topology"}})
    llm = StallsAtTheEnd()
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


def ask(question: str, **config) -> dict:
    return {"query": {"question": question}, "config": config}


async def test_a_query_that_times_out_on_the_engine_is_charged():
    app, llm = make_echo_app()
    settings = ServerSettings(tenant_tokens_per_minute=5, documents="memory", query_timeout=30)
    async with serve({"echo": app}, settings) as c:
        late = await c.post(
            "/v1/apps/echo/query", json=ask(f"{HANG} a question of several words", timeout=0.3)
        )
        assert late.status_code == 504, late.text
        after = await c.post("/v1/apps/echo/query", json=ask("and another"))
        llm.release.set()
        assert after.status_code == 429 and after.json()["error"] == "token_rate_exceeded", after.text


async def test_a_query_stream_closed_after_its_last_token_is_charged():
    app, llm = stalling_app()
    server = create_server({"agent": app}, ServerSettings(tenant_tokens_per_minute=1, documents="memory"))
    async with server.router.lifespan_context(server):
        sent = await post_and_hang_up(
            server,
            "/v1/apps/agent/query",
            {**ask("name three fruits"), "stream": True},
            lambda: llm.stalled >= 1,
        )
        assert b"event: token" in b"".join(m.get("body", b"") for m in sent)
        recent = server.state.teola.recent
        await until(lambda: recent.listing("default")[0]["status"] != "running")  # the query has ended
        llm.release.set()
        after = await post_and_hang_up(server, "/v1/apps/agent/query", ask("again"), lambda: False)
        assert after[0]["status"] == 429, after


async def test_a_door_stream_closed_after_its_last_token_is_charged():
    app, llm = stalling_app()
    server = create_server({"agent": app}, ServerSettings(tenant_tokens_per_minute=1, documents="memory"))
    chat = {"model": "agent", "messages": [{"role": "user", "content": "name three fruits"}], "max_tokens": 8}
    async with server.router.lifespan_context(server):
        sent = await post_and_hang_up(
            server, "/v1/chat/completions", {**chat, "stream": True}, lambda: llm.stalled >= 1
        )
        assert b'"content": "' in b"".join(m.get("body", b"") for m in sent)
        llm.release.set()
        after = await post_and_hang_up(server, "/v1/chat/completions", chat, lambda: False)
        assert after[0]["status"] == 429, after


async def test_a_door_call_whose_client_hangs_up_is_charged():
    app, llm = make_echo_app()
    server = create_server({"echo": app}, ServerSettings(tenant_tokens_per_minute=1, documents="memory"))
    chat = {
        "model": "echo",
        "messages": [{"role": "user", "content": f"{HANG} name three fruits"}],
        "max_tokens": 8,
    }
    async with server.router.lifespan_context(server):
        sent = await post_and_hang_up(server, "/v1/chat/completions", chat, lambda: llm.hung >= 1)
        assert not any(m.get("status") == 200 for m in sent), sent
        llm.release.set()
        after = await post_and_hang_up(
            server,
            "/v1/chat/completions",
            {**chat, "messages": [{"role": "user", "content": "again"}]},
            lambda: False,
        )
        assert after[0]["status"] == 429, after


async def test_a_query_whose_client_hangs_up_is_charged():
    app, llm = make_echo_app()
    server = create_server({"echo": app}, ServerSettings(tenant_tokens_per_minute=1, documents="memory"))
    async with server.router.lifespan_context(server):
        await post_and_hang_up(
            server, "/v1/apps/echo/query", ask(f"{HANG} name three fruits"), lambda: llm.hung >= 1
        )
        recent = server.state.teola.recent
        await until(lambda: recent.listing("default")[0]["status"] != "running")  # the query has ended
        llm.release.set()
        after = await post_and_hang_up(server, "/v1/apps/echo/query", ask("again"), lambda: False)
        assert after[0]["status"] == 429, after
