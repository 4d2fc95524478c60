"""The emulator's parts that need no tokenizer and no server: output length specs, the engine pool's
least-loaded balancing and exact token counts, vLLM's stream chunk shapes, the metrics page."""

from __future__ import annotations

import asyncio
import json

import pytest

from teola.emulate.call import Call
from teola.emulate.lengths import OutputLengths
from teola.emulate.metrics import render
from teola.emulate.pool import EnginePool
from teola.emulate.shapes import ChunkWriter, response

PROFILE = "a100-llama3.1-8b-measured"


def test_output_lengths_are_seeded_capped_and_pure_functions_of_the_prompt():
    lengths = OutputLengths("uniform:5,50", seed=3)
    draws = [lengths.draw([1, 2, i], 30) for i in range(40)]
    assert all(5 <= d <= 30 for d in draws) and len(set(draws)) > 5 and 30 in draws
    assert draws == [OutputLengths("uniform:5,50", seed=3).draw([1, 2, i], 30) for i in range(40)]
    assert draws != [OutputLengths("uniform:5,50", seed=4).draw([1, 2, i], 30) for i in range(40)]
    assert OutputLengths("max").draw([1], 17) == 17 and OutputLengths("fixed:4").draw([1], 17) == 4
    assert all(d >= 1 for d in (OutputLengths("exponential:3").draw([i], 99) for i in range(50)))


@pytest.mark.parametrize(
    "spec", ["uniform:5", "fixed:0", "normal:3", "uniform:9,3", "lognormal:x,1", "none.json"]
)
def test_bad_length_specs_name_the_accepted_forms(spec):
    with pytest.raises(ValueError, match="--output-len"):
        OutputLengths(spec)


async def test_the_pool_balances_to_the_least_loaded_engine_and_writes_exact_counts():
    pool = EnginePool(PROFILE, instances=2)
    await pool.start()
    try:

        async def run(n):
            events = [e async for e in pool.generate(list(range(100, 400)), n, "length", [7])]
            return events

        first, second = await asyncio.gather(run(7), run(3))
        assert [v for k, v in first if k == "token"] == list(range(1, 8))
        assert first[-1][1]["num_output_tokens"] == 7 and second[-1][1]["num_output_tokens"] == 3
        states = pool.states()
        assert [s.finished for s in states] == [{"length": 1}, {"length": 1}]  # one call on each engine
        again = await pool.complete(list(range(100, 400)), 2, "stop", [7])
        assert again["num_cached_tokens"] == 288  # 18 full blocks of 16 of the 300-token prompt
        assert again["output_token_ids"] == [7, 7]
        # the next turn: the prompt, the answer (7 x 7) and more; the answer's tokens are cached too
        turn = await pool.complete(list(range(100, 400)) + [7] * 7 + list(range(20)), 1, "stop", [7])
        assert turn["num_cached_tokens"] == 304  # 19 full blocks: into the answer
    finally:
        await pool.stop()


async def test_closing_a_stream_early_aborts_its_call():
    pool = EnginePool(PROFILE)
    await pool.start()
    try:
        stream = pool.generate(list(range(50)), 500, "length", [7])
        assert await stream.__anext__() == ("token", 1)
        await stream.aclose()
        await asyncio.sleep(0.05)
        state = pool.states()[0]
        assert (state.running, state.waiting, state.finished) == (0, 0, {"abort": 1})
    finally:
        await pool.stop()


def call(chat: bool, **kw) -> Call:
    fields = dict(
        chat=chat,
        id="x-1",
        model="m",
        prompt_ids=[1, 2, 3],
        max_tokens=2,
        tokens=2,
        reason="length",
        stream=True,
        include_usage=True,
        continuous_usage=False,
        echo=False,
    )
    return Call(**{**fields, **kw})


def events(text: str) -> list[dict]:
    return [json.loads(e[6:]) for e in text.split("\n\n") if e.startswith("data: {")]


def test_stream_chunks_have_vllms_shape():
    result = {"num_prompt_tokens": 3, "num_output_tokens": 2, "num_cached_tokens": 0}
    w = ChunkWriter(call(chat=True))
    chunks = events(w.first() + w.token(" a", 1, False) + w.token(" a", 2, True) + w.last(result))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["finish_reason"] for c in chunks[:3]] == [None, None, "length"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 2
    assert chunks[-1]["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    w = ChunkWriter(call(chat=False, include_usage=False, continuous_usage=True))
    assert w.first() == "" and w.last(result) == ""
    chunk = events(w.token(" a", 1, False))[0]
    assert chunk["object"] == "text_completion" and chunk["usage"]["completion_tokens"] == 1
    body = response(call(chat=False, stream=False), " a a", result)
    assert body["choices"][0]["text"] == " a a" and body["usage"]["total_tokens"] == 5


async def test_metrics_carry_vllms_names_per_engine():
    pool = EnginePool(PROFILE, instances=2)
    text = render("m", pool.states())
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert f'{name}{{engine="0",model_name="m"}} 0.0' in text
        assert f'{name}{{engine="1",model_name="m"}} 0.0' in text
    assert "process_cpu_seconds_total" in text
