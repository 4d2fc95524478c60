"""The OpenAI door's streams send `: keep-alive` comments while the engine is silent
(ServerSettings.sse_keepalive, as the native query stream does), before the first chunk of a slow
first token; the openai SDK skips them and reads the same answer."""

from __future__ import annotations

import openai
import pytest

from engines.sim.sim_engine import SimEngine
from teola.server import ServerSettings
from tests.unit.server.test_openai_door import serve

FIRST_TOKEN_S = 0.4  # the simulated engine's silence before its first token
CALLS = [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Name a fruit."}]}),
    ("/v1/completions", {"prompt": "Say hi."}),
]


async def raw_lines(http, path: str, body: dict) -> list[str]:
    """Every non-empty line of a streamed door call, comments included."""
    async with http.stream(
        "POST", path, json={"model": "agent", "max_tokens": 8, **body, "stream": True}
    ) as r:
        assert r.status_code == 200
        return [line async for line in r.aiter_lines() if line]


@pytest.mark.wall_clock
@pytest.mark.parametrize("path, body", CALLS)
async def test_a_slow_first_token_is_preceded_by_keep_alive_comments(path, body):
    settings = ServerSettings(sse_keepalive=0.05)
    async with serve(settings, engine=SimEngine("llm", latency={1: FIRST_TOKEN_S})) as (http, _, _llm):
        lines = await raw_lines(http, path, body)
    first_data = next(i for i, line in enumerate(lines) if line.startswith("data:"))
    comments = [i for i, line in enumerate(lines) if line == ": keep-alive"]
    assert len([i for i in comments if i < first_data]) >= 3, lines[
        : first_data + 1
    ]  # FIRST_TOKEN_S / 0.05 s
    assert lines[-1] == "data: [DONE]"
    assert all(line.startswith("data:") or line == ": keep-alive" for line in lines)


@pytest.mark.parametrize("path, body", CALLS)
async def test_keep_alive_comments_are_off_at_zero(path, body):
    settings = ServerSettings(sse_keepalive=0)
    async with serve(settings, engine=SimEngine("llm", latency={1: 0.2})) as (http, _, _llm):
        lines = await raw_lines(http, path, body)
    assert ": keep-alive" not in lines and lines[-1] == "data: [DONE]"


async def test_the_openai_sdk_reads_a_stream_with_keep_alive_comments():
    settings = ServerSettings(sse_keepalive=0.05)
    async with serve(settings, engine=SimEngine("llm", latency={1: FIRST_TOKEN_S})) as (http, _, llm):
        client = openai.AsyncOpenAI(base_url="http://teola.test/v1", api_key="none", http_client=http)
        stream = await client.chat.completions.create(
            model="agent",
            max_tokens=8,
            temperature=0,
            stream=True,
            extra_body={"ignore_eos": True},
            messages=[{"role": "user", "content": "Name a fruit."}],
        )
        chunks = [c async for c in stream]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        expected = (await llm.engine.execute("decoding", [dict(llm.requests[-1])]))[0]["text"]
    assert text == expected and chunks[-1].choices[0].finish_reason is not None
