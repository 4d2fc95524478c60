"""The remote LLM engine sends a decode nobody reads while it runs as one non-streamed answer (less
client CPU than one parsed chunk per token), and streams when items, deltas or progress are read,
both as plain JSON (never the SDK's typed call, which builds a model per streamed chunk): checked
against `teola emulate` (wall-clock GPU timing, exact token counts) on a loopback port."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.services

REQUEST = {
    "parts": [["system", "You answer."], ["user", "Name three rivers."]],
    "max_tokens": 24,
    "ignore_eos": True,
}


@pytest.fixture(scope="module")
def emulator_url():
    from bench.lib.results import serve_in_thread
    from engines.assets.paths import configure_engine_env
    from teola.emulate.server import create_emulator
    from teola.emulate.settings import EmulatorSettings

    configure_engine_env()
    url, server = serve_in_thread(create_emulator(EmulatorSettings("a100-llama3.1-8b-measured")))
    yield url
    server.should_exit = True


async def _engine(url: str):
    from engines.openai.llm import OpenAILLMEngine

    engine = OpenAILLMEngine("llm", url=url)
    await engine.start()
    sent: list[bool] = []
    complete, stream = engine.client.complete, engine.client.stream

    async def spy_complete(body):
        sent.append(bool(body.get("stream")))
        return await complete(body)

    def spy_stream(body):
        sent.append(bool(body.get("stream")))
        return stream(body)

    async def typed_call(**body):
        raise AssertionError("a completion went through the SDK's typed call (a model per streamed chunk)")

    engine.client.complete, engine.client.stream = spy_complete, spy_stream
    engine.client.api.completions.create = typed_call
    return engine, sent


async def test_execute_sends_one_answer_with_the_streamed_results(emulator_url):
    engine, sent = await _engine(emulator_url)
    try:
        (whole,) = await engine.execute("decoding", [dict(REQUEST)])
        finals = [v async for _, kind, v in engine.stream("decoding", [dict(REQUEST)]) if kind == "final"]
    finally:
        await engine.stop()
    assert sent == [False, True]
    (streamed,) = finals
    for key in ("text", "num_output_tokens", "num_prompt_tokens", "output_token_ids", "finish_reason"):
        assert whole[key] == streamed[key], key
    assert whole["num_output_tokens"] == 24 and whole["finish_reason"] == "length"


async def test_a_split_decode_still_streams_so_it_can_stop_at_its_items(emulator_url):
    engine, sent = await _engine(emulator_url)
    try:
        (result,) = await engine.execute("decoding", [{**REQUEST, "split": "list", "max_items": 2}])
    finally:
        await engine.stop()
    assert sent == [True]
    assert result["num_output_tokens"] == 24
