"""Per-call overhead of the remote LLM path (engine kind "openai" over a `vllm serve` on loopback)
vs the in-process vLLM adapter: the same calls (a 1-token prefill-only call, and a 16-token greedy
decode) on the same model and settings, one call at a time; the engines run one after the other,
never together. Usage: python -m bench remote_overhead [--calls N]"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from bench.lib.results import percentile, write_results
from bench.lib.tables import num, table

MODEL = "smollm2-135m-instruct"
CALLS = {"prefill (1 token)": ("prefilling", 1), "decode (16 tokens)": ("decoding", 16)}


def request(i: int, max_tokens: int) -> dict:
    # a different question per call, so the prefix cache holds only the shared template start
    return {
        "parts": [["instruction", "Answer briefly."], ["question", f"What is {i} plus {i + 1}?"]],
        "max_tokens": max_tokens,
        "ignore_eos": True,
    }


async def timed(engine, calls: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for label, (op, n) in CALLS.items():
        await engine.execute(op, [request(-1, n)])  # warm-up
        lat = []
        for i in range(calls):
            t = time.perf_counter()
            await engine.execute(op, [request(i, n)])
            lat.append(time.perf_counter() - t)
        out[label] = lat
    return out


async def in_process(calls: int) -> dict[str, list[float]]:
    from engines.vllm.engine import VLLMEngine

    engine = VLLMEngine("llm", model=MODEL, max_num_seqs=8)
    await engine.start()
    try:
        return await timed(engine, calls)
    finally:
        await engine.stop()


async def remote(calls: int) -> dict[str, list[float]]:
    from engines.openai.llm import OpenAILLMEngine
    from engines.vllm.serve import ServeProcess

    with ServeProcess(MODEL, max_num_seqs=8, dev_mode=False) as url:
        engine = OpenAILLMEngine("llm", url=url, model=MODEL)
        await engine.start()
        try:
            return await timed(engine, calls)
        finally:
            await engine.stop()


def summary(local: dict[str, list[float]], far: dict[str, list[float]]) -> tuple[dict, str]:
    data = {}
    for label in CALLS:
        a, b = statistics.median(local[label]), statistics.median(far[label])
        data[label] = {
            "in_process_ms_p50": 1e3 * a,
            "remote_ms_p50": 1e3 * b,
            "overhead_ms_p50": 1e3 * (b - a),
            "in_process_ms_p90": 1e3 * percentile(local[label], 90),
            "remote_ms_p90": 1e3 * percentile(far[label], 90),
        }
    return data, markdown(data)


def markdown(results: dict[str, dict[str, float]]) -> str:
    """The page's table from the medians of `summary` (what remote_overhead.json keeps as "results")."""
    rows = [
        [label, num(r["in_process_ms_p50"]), num(r["remote_ms_p50"]), f"{r['overhead_ms_p50']:+.1f}"]
        for label, r in results.items()
    ]
    return (
        "## Remote LLM path (vllm serve over HTTP) vs in-process vLLM\n\n"
        "`python -m bench remote_overhead`: the same calls, one at a time, on SmolLM2-135M (CPU), "
        "in-process `AsyncLLM` vs engine kind `openai` against `vllm serve` on loopback; median per call.\n\n"
        + "\n".join(table(["call", "in-process ms", "remote ms", "overhead ms"], rows))
    )


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of `python -m bench remote_overhead`."""
    ap.add_argument("--calls", type=int, default=20)


def run_cli(args: argparse.Namespace, argv: list[str], ap: argparse.ArgumentParser) -> None:
    """Runs `python -m bench remote_overhead` (argv: the options given, for its page)."""
    local = asyncio.run(in_process(args.calls))
    far = asyncio.run(remote(args.calls))
    data, md = summary(local, far)
    load = os.getloadavg()
    md += (
        f"\n\nLoad average at the end of the run: {load[0]:.1f} (other work on the machine shifts both "
        "columns)."
    )
    write_results(
        "remote_overhead",
        {"calls": args.calls, "results": data, "load_average": load},
        md,
        subject="overheads",
    )
