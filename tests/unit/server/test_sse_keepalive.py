"""A streamed query sends `: keep-alive` comments while idle (ServerSettings.sse_keepalive), and
teola.client's event reader skips them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engines.sim.sim_engine import SimEngine
from teola import App, Engine, Node
from teola.client.events import EventReader, Token, UnknownEvent
from teola.server import ServerSettings
from tests.support.http import sse
from tests.unit.server.test_server import serve

PAUSE = 0.4  # the LLM's silence before it answers


class SlowEngine(SimEngine):
    """A sim LLM that is silent for PAUSE seconds before each batch."""

    def __init__(self, name: str) -> None:
        super().__init__(name, serial=False)

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        await asyncio.sleep(PAUSE)
        return await super().execute(op, requests)

    async def stream(self, op: str, requests: list[dict[str, Any]]):
        await asyncio.sleep(PAUSE)
        async for event in super().stream(op, requests):
            yield event


def make_slow_app() -> App:
    app = App("slow")
    app.register_engine(Engine("llm", kind="vllm"), backend=SlowEngine("llm"))
    app.update_template(
        [
            Node(
                "llm",
                name="answer",
                engine="llm",
                config={
                    "parts": [["instruction", "Answer briefly."], ["question", "$query.question"]],
                    "max_tokens": 8,
                },
            )
        ]
    )
    return app


async def _stream(keepalive: float) -> str:
    settings = ServerSettings(documents="memory", sse_keepalive=keepalive)
    async with serve({"slow": make_slow_app()}, settings) as client:
        r = await client.post("/v1/apps/slow/query", json={"query": {"question": "Why?"}, "stream": True})
    assert r.status_code == 200
    return r.text


@pytest.mark.wall_clock  # counts comments sent every 50 ms during a 0.4 s silence
async def test_an_idle_stream_sends_keep_alive_comments_that_the_client_skips():
    text = await _stream(0.05)
    blocks = text.strip().split("\n\n")
    comments = [i for i, b in enumerate(blocks) if b == ": keep-alive"]
    assert len(comments) >= 3  # PAUSE / 0.05 s of silence
    # they arrive during the silence: after the LLM primitive was batched, before its first token
    started = next(i for i, b in enumerate(blocks) if b.startswith("event: progress") and '"started"' in b)
    first_token = next(i for i, b in enumerate(blocks) if b.startswith("event: token"))
    assert any(started < i < first_token for i in comments)
    reader = EventReader()
    got = [e for e in map(reader.feed, text.split("\n")) if e is not None]
    reader.finish()
    assert not any(isinstance(e, UnknownEvent) for e in got)
    assert reader.result is not None and reader.text == "".join(e.text for e in got if isinstance(e, Token))
    assert [k for k, _ in sse(text)][-3:] == ["answer", "trace", "done"]


async def test_keep_alive_comments_can_be_turned_off():
    assert ": keep-alive" not in await _stream(0)


@pytest.mark.parametrize(
    "value, message",
    [(-1, "must be a number of seconds >= 0"), ("15", "valid number"), (True, "valid number")],
)
def test_the_keep_alive_interval_is_validated(value, message):
    with pytest.raises(ValueError, match=f"ServerSettings.sse_keepalive.*{message}"):
        ServerSettings(sse_keepalive=value)


def test_the_keep_alive_interval_comes_from_the_environment():
    assert ServerSettings.from_env({"TEOLA_SSE_KEEPALIVE": "2.5"}).sse_keepalive == 2.5
    assert ServerSettings().sse_keepalive == 15.0
