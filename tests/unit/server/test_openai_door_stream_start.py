"""A streamed answer through the OpenAI door starts with its first token, as vLLM's and OpenAI's
servers start theirs: no data chunk goes out before the engine decoded something, so the time to
the first chunk is the caller's time to first token; the chat role travels in that first chunk."""

from __future__ import annotations

import json
import time

from engines.sim.sim_engine import SimEngine
from tests.support.tool_sim import ToolCallingSim
from tests.unit.server.test_openai_door import serve
from tests.unit.server.test_openai_door_tools import QUESTION, WEATHER

PREFILL_S = 0.3  # the simulated engine's whole latency, spent before its first token


async def first_data(http, path: str, body: dict) -> tuple[float, dict, list[str]]:
    """(seconds to the first `data:` line, its JSON, every data line) of a streamed door call."""
    t0 = time.monotonic()
    first_at, lines = None, []
    async with http.stream("POST", path, json={**body, "stream": True}) as answer:
        assert answer.status_code == 200
        async for line in answer.aiter_lines():
            if line.startswith("data:"):
                first_at = time.monotonic() - t0 if first_at is None else first_at
                lines.append(line.removeprefix("data: "))
    return first_at, json.loads(lines[0]), lines


async def test_the_first_chat_chunk_carries_the_role_and_the_first_token():
    async with serve(engine=SimEngine("llm", latency={1: PREFILL_S})) as (http, _, _llm):
        waited, first, lines = await first_data(
            http,
            "/v1/chat/completions",
            {"model": "agent", "max_tokens": 8, "messages": [{"role": "user", "content": "Name a fruit."}]},
        )
        delta = first["choices"][0]["delta"]
        assert delta["role"] == "assistant" and delta["content"], first
        assert waited >= PREFILL_S * 0.9, "the first chunk left before the engine decoded a token"
        later = [json.loads(x) for x in lines[1:-1]]
        assert all("role" not in c["choices"][0]["delta"] for c in later if c["choices"])


async def test_the_first_completion_chunk_carries_text():
    async with serve(engine=SimEngine("llm", latency={1: PREFILL_S})) as (http, _, _llm):
        waited, first, _ = await first_data(
            http, "/v1/completions", {"model": "agent", "max_tokens": 8, "prompt": "Say hi."}
        )
        assert first["choices"][0]["text"] and waited >= PREFILL_S * 0.9


async def test_a_tool_calling_stream_starts_with_its_text_and_the_role():
    """Tools offered, the text before the call goes first with the role; the call follows whole."""
    async with serve(engine=ToolCallingSim("llm")) as (http, _, _llm):
        _, first, lines = await first_data(
            http, "/v1/chat/completions", {"model": "agent", "messages": QUESTION, "tools": [WEATHER]}
        )
        delta = first["choices"][0]["delta"]
        assert (
            delta["role"] == "assistant"
            and "Let me check. ".startswith(delta["content"])
            and delta["content"]
        )
        calls = [json.loads(x)["choices"][0]["delta"].get("tool_calls") for x in lines[1:-1]]
        assert [c[0]["function"]["name"] for c in calls if c] == ["get_weather"]
