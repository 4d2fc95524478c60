"""Time to first token with and without a partial prefill of the prompt's prefix (the prefill-split pass).

Each trial builds fresh text (so the prefix cache cannot hold it from an earlier trial): a ~600-token prefix
(instruction + first context part) and ~400 more tokens (second context part + question).
- "partial": partial_prefilling of the prefix, then a decoding request for the whole prompt; timed is the
  decoding request only (its TTFT), as when the prefix was ready early and prefilled while waiting.
- "full": the same kind of prompt (also fresh) decoded with no earlier prefill.
A decoding request with max_tokens=1 ends at its first token, so its latency is its TTFT.

Reproduce: .venv/bin/python -m bench prefix_ttft --trials 8
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import time
from pathlib import Path

from bench.lib.results import machine, results_dir
from bench.lib.tables import num, table
from engines.vllm.engine import VLLMEngine

INSTRUCTION = ["instruction", "Answer the question using only the records below."]


def _sentences(rng: random.Random):
    while True:
        yield (
            f"Record {rng.randrange(10**9)}: shipment {rng.randrange(10**4)} of "
            f"{rng.choice(['steel', 'grain', 'copper', 'cotton', 'timber'])} weighed {rng.randrange(10**5)} "
            "kg."
        )


def _fill(engine: VLLMEngine, head: list, name: str, target: int, rng: random.Random, complete: bool) -> list:
    """Append a part of sentences to `head` until the rendered prompt reaches `target` tokens."""
    text, gen = "", _sentences(rng)
    while True:
        candidate = (text + " " + next(gen)).strip()
        if len(engine.prompt_token_ids(head + [[name, candidate]], complete=complete)) > target:
            return head + [[name, text]]
        text = candidate


def make_prompt(
    engine: VLLMEngine, rng: random.Random, prefix_tokens: int, total_tokens: int
) -> tuple[list, list]:
    """(prefix parts, all parts) with about prefix_tokens / total_tokens tokens."""
    prefix = _fill(engine, [INSTRUCTION], "records", prefix_tokens, rng, complete=False)
    question = ["question", "Which shipment was the heaviest?"]
    full = _fill(engine, prefix, "more_records", total_tokens - 12, rng, complete=False) + [question]
    return prefix, full


async def run(trials: int, warmup: int, prefix_tokens: int, total_tokens: int, seed: int) -> dict:
    engine = VLLMEngine("llm", max_model_len=2048, max_num_seqs=4)
    await engine.start()
    rng = random.Random(seed)
    rows = []
    try:
        for trial in range(warmup + trials):
            record = {}
            for mode in ("partial", "full") if trial % 2 == 0 else ("full", "partial"):
                prefix, full = make_prompt(engine, rng, prefix_tokens, total_tokens)
                if mode == "partial":
                    [pre] = await engine.execute("partial_prefilling", [{"parts": prefix, "complete": False}])
                    record["prefix_tokens"] = pre["num_prompt_tokens"]
                start = time.perf_counter()
                [out] = await engine.execute("decoding", [{"parts": full, "max_tokens": 1}])
                record[mode] = {
                    "ttft_s": time.perf_counter() - start,
                    "num_prompt_tokens": out["num_prompt_tokens"],
                    "num_cached_tokens": out["num_cached_tokens"],
                }
            if trial >= warmup:
                rows.append(record)
                print(
                    f"trial {trial - warmup}: partial {record['partial']['ttft_s'] * 1e3:.1f} ms (cached "
                    f"{record['partial']['num_cached_tokens']}/{record['partial']['num_prompt_tokens']}), "
                    f"full {record['full']['ttft_s'] * 1e3:.1f} ms (cached "
                    f"{record['full']['num_cached_tokens']}/{record['full']['num_prompt_tokens']})",
                    flush=True,
                )
        block_size = engine.block_size
    finally:
        await engine.stop()
    partial = [r["partial"]["ttft_s"] for r in rows]
    full = [r["full"]["ttft_s"] for r in rows]
    return {
        "benchmark": "prefix_ttft",
        "trials": trials,
        "warmup": warmup,
        "seed": seed,
        "model": engine.model,
        "block_size": block_size,
        "prefix_tokens_mean": statistics.mean(r["prefix_tokens"] for r in rows),
        "prompt_tokens_mean": statistics.mean(r["full"]["num_prompt_tokens"] for r in rows),
        "partial_cached_tokens_mean": statistics.mean(r["partial"]["num_cached_tokens"] for r in rows),
        "full_cached_tokens_mean": statistics.mean(r["full"]["num_cached_tokens"] for r in rows),
        "ttft_partial_median_ms": statistics.median(partial) * 1e3,
        "ttft_full_median_ms": statistics.median(full) * 1e3,
        "ttft_partial_mean_ms": statistics.mean(partial) * 1e3,
        "ttft_full_mean_ms": statistics.mean(full) * 1e3,
        "ratio_full_over_partial_median": statistics.median(full) / statistics.median(partial),
        "rows": rows,
        "machine": machine_info(),
        "command": f".venv/bin/python -m bench prefix_ttft --trials {trials} --warmup {warmup} "
        f"--prefix-tokens {prefix_tokens} --total-tokens {total_tokens} --seed {seed}",
    }


def machine_info() -> dict:
    """bench.lib.results.machine()'s facts and the versions a TTFT depends on."""
    import torch
    import vllm

    return {**machine(), "vllm": vllm.__version__, "torch": torch.__version__, "os": platform.platform()}


def write_markdown(res: dict, path: Path) -> None:
    m = res["machine"]
    cases = "\n".join(
        table(
            ["case", "TTFT median (ms)", "TTFT mean (ms)", "cached prompt tokens (mean)"],
            [
                [
                    "prefix partially prefilled",
                    num(res["ttft_partial_median_ms"]),
                    num(res["ttft_partial_mean_ms"]),
                    num(res["partial_cached_tokens_mean"], 0),
                ],
                [
                    "full prefill",
                    num(res["ttft_full_median_ms"]),
                    num(res["ttft_full_mean_ms"]),
                    num(res["full_cached_tokens_mean"], 0),
                ],
            ],
            "lrrr",
        )
    )
    path.write_text(f"""## Prefix reuse: time to first token (bench/studies/overheads/prefix_ttft.py)

A ~{res["prompt_tokens_mean"]:.0f}-token prompt whose ~{res["prefix_tokens_mean"]:.0f}-token prefix was \
partially
prefilled earlier, vs the same kind of prompt prefilled in full. Fresh text every trial;
{res["trials"]} trials after {res["warmup"]} warm-up; model {res["model"]} on vLLM {m["vllm"]}
(KV block size {res["block_size"]}: only full blocks of the prefix are reused).

{cases}

TTFT ratio (full / partial, medians): **{res["ratio_full_over_partial_median"]:.2f}x**

Machine: {m["cpu"]}, {m["cores"]} cores, Python {m["python"]}, torch {m["torch"]}, {m["os"]}.
Reproduce: `{res["command"]}`
""")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m bench prefix_ttft`."""
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--prefix-tokens", type=int, default=600)
    parser.add_argument("--total-tokens", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)


def run_cli(args: argparse.Namespace, argv: list[str], parser: argparse.ArgumentParser) -> None:
    """Runs `python -m bench prefix_ttft` (argv: the options given, for its page)."""
    if not 0 < args.prefix_tokens < args.total_tokens <= 2000:
        parser.error("need 0 < --prefix-tokens < --total-tokens <= 2000 (the engine's max_model_len is 2048)")
    res = asyncio.run(run(args.trials, args.warmup, args.prefix_tokens, args.total_tokens, args.seed))
    folder = results_dir("overheads")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prefix_ttft.json").write_text(json.dumps(res, indent=2))
    write_markdown(res, folder / "prefix_ttft.md")
    print(
        f"TTFT median: partial {res['ttft_partial_median_ms']:.1f} ms, full {res['ttft_full_median_ms']:.1f} "
        f"ms, ratio {res['ratio_full_over_partial_median']:.2f}x; wrote {folder}/prefix_ttft.json and .md"
    )
