"""Answer quality and retrieval recall of document QA, teola vs LlamaIndex, on enough questions to
tell them apart (issue 22). bench.studies.rag.doc_qa measures speed with 3-6 queries per point, where one
answer moves the "contains gold" rate by 17-33 points; this script asks many more questions and
reports only what does not depend on timing.

    python -m bench doc_qa_quality [--n 40] [--apps naive_rag,advanced_rag] [--sizes small,large]
                                   [--seed S] [--exclude-seeds 0,1 --exclude-n 100]
    python -m bench doc_qa_quality --pool a.json,b.json --out pooled   # paired totals of earlier runs

Same workload, systems and shipped defaults as bench.studies.rag.doc_qa (NarrativeQA questions over their
story hidden among other stories; teola's shipped apps vs the real LlamaIndex library with its own
defaults, on the same engine instances). Queries run in bursts of `--concurrency` to finish sooner:
decoding is greedy, so what a system answers does not depend on the load, and no latency is reported.
Per system: a gold answer contained in the reply (count, rate and its 95% Wilson interval), token
F1, the gold story in the final context (recall), a gold answer string in the final context (what
synthesis could copy), and LLM work per query.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

from bench.lib.quality import paired_difference, wilson
from bench.lib.results import write_results
from bench.lib.tables import num, pct, table
from bench.lib.workloads import narrative_qa_queries
from bench.studies.rag.doc_qa_runs import Systems, summarize
from bench.studies.rag.doc_qa_systems import SYSTEMS
from bench.studies.rag.rag_setup import make_apps, reset_prefix_cache

SIZES = {"small": 2, "large": 28}


async def burst(
    systems: Systems, system: str, queries: list[dict[str, Any]], concurrency: int
) -> list[dict[str, Any]]:
    await reset_prefix_cache(systems.app)
    gate = asyncio.Semaphore(concurrency)

    async def one(q: dict[str, Any]) -> dict[str, Any]:
        async with gate:
            return await systems.one(system, q)

    return list(await asyncio.gather(*(one(q) for q in queries)))


def held_out_queries(
    n: int, distractors: int, seed: int, exclude_seeds: list[int], exclude_n: int
) -> list[dict[str, Any]]:
    """The first n questions of `seed` that are not among the first `exclude_n` of any excluded seed
    (those chose a prompt or were measured already), so a new sample is disjoint from earlier ones."""
    seen = {(q["question"], q["gold"]) for s in exclude_seeds for q in narrative_qa_queries(exclude_n, 0, s)}
    pool = narrative_qa_queries(n + len(seen), distractors, seed)
    out = [q for q in pool if (q["question"], q["gold"]) not in seen][:n]
    if len(out) < n:
        raise ValueError(f"only {len(out)} questions left after excluding seeds {exclude_seeds}")
    return out


def hits(row: dict[str, Any], system: str) -> list[bool]:
    """Per question, in the run's order: did the system's reply contain a gold answer (failed = no)."""
    return [bool(r.get("ok") and r.get("contains")) for r in row[system]["records"]]


def paired(row: dict[str, Any]) -> dict[str, Any]:
    """teola minus LlamaIndex on "answer contains gold", paired on the same questions."""
    return paired_difference(hits(row, "teola"), hits(row, "LlamaIndex"))


async def measure(
    apps: dict[str, Any],
    names: list[str],
    sizes: list[str],
    n: int,
    concurrency: int,
    seed: int,
    exclude: tuple[list[int], int] = ([], 0),
) -> dict[str, Any]:
    runs: dict[str, Any] = {}
    for name in names:
        systems = Systems(apps[name], {}, "library")
        for size in sizes:
            queries = held_out_queries(n, SIZES[size], seed, *exclude)
            row = runs[f"{name}/{size}"] = {}
            for system in SYSTEMS:
                t0 = time.perf_counter()
                recs = await burst(systems, system, queries, concurrency)
                row[system] = summarize(recs) | {
                    "contains_k": sum(int(r.get("contains", 0) > 0) for r in recs if r.get("ok")),
                    "records": [
                        {"question": q["question"]}
                        | {
                            k: r.get(k)
                            for k in (
                                "ok",
                                "contains",
                                "f1",
                                "recall",
                                "answer_in_context",
                                "reply",
                                "context",
                                "error",
                            )
                        }
                        for q, r in zip(queries, recs)
                    ],
                }
                print(
                    f"[doc_qa_quality] {name}/{size} {system}: contains {row[system].get('contains', 0):.0%} "
                    f"F1 {row[system].get('f1', 0):.3f} recall {row[system].get('recall', 0):.0%} "
                    f"answer in context {row[system].get('answer_in_context', 0):.0%} "
                    f"({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
    return runs


def paired_table(pairs: dict[str, dict[str, Any]]) -> list[str]:
    """teola against LlamaIndex on the same questions, per flow (`pairs`: flow -> paired difference)."""
    return table(
        [
            "flow",
            "questions",
            "right only for teola",
            "right only for LlamaIndex",
            "teola - LlamaIndex, points (95% interval)",
            "McNemar exact p",
        ],
        (
            [
                flow,
                d["n"],
                d["only_a"],
                d["only_b"],
                f"{100 * d['diff']:+.1f} ({100 * d['lo']:+.1f} to {100 * d['hi']:+.1f})",
                num(d["p"], 2),
            ]
            for flow, d in pairs.items()
        ),
    )


def markdown(data: dict[str, Any]) -> str:
    seed = f" (seed {data['seed']})" if data.get("seed") else ""
    held = (
        f", excluding the first {data['exclude_n']} questions of seeds {data['exclude_seeds']}"
        if data.get("exclude_seeds")
        else ""
    )
    lines = [
        f"## Document QA answer quality and recall, teola vs LlamaIndex, {data.get('n', 'many')} "
        f"questions{seed}{held} per flow (issue 22)",
        "",
        f"Command: `{data['command']}` ({data['seconds'] / 60:.1f} min). "
        + (__doc__ or "").split("\n\n", 2)[2].strip().replace("\n", " "),
        "",
    ]
    rows = []
    for flow, row in data["runs"].items():
        for system in SYSTEMS:
            r = row[system]
            k, ok = r.get("contains_k", 0), r["n"] - r["failed"]
            lo, hi = wilson(k, ok)
            rows.append(
                [
                    flow,
                    system,
                    r["n"],
                    r["failed"],
                    f"{k}/{ok} = {pct(r.get('contains'))} ({100 * lo:.0f}-{100 * hi:.0f}%)",
                    num(r.get("f1", 0), 3),
                    pct(r.get("recall")),
                    pct(r.get("answer_in_context")),
                    num(r.get("calls", 0)),
                    num(r.get("prompt_tokens", 0), 0),
                    num(r.get("decode_tokens", 0), 0),
                ]
            )
    lines += table(
        [
            "flow",
            "system",
            "n",
            "failed",
            "answer contains gold (k/n, 95% interval)",
            "token F1",
            "gold story in context",
            "gold answer in context",
            "LLM calls",
            "prompt tok",
            "decode tok",
        ],
        rows,
    )
    lines += ["", "Paired on the same questions (answer contains gold; a failed query counts as wrong):", ""]
    lines += paired_table({flow: paired(row) for flow, row in data["runs"].items()})
    return "\n".join(lines) + "\n"


def pool(paths: list[str]) -> dict[str, dict[str, Any]]:
    """Paired teola-vs-LlamaIndex totals per flow over earlier runs' JSON files (disjoint questions:
    see --exclude-seeds). Records pair by position: a run asks both systems the same list."""
    import json

    pooled: dict[str, dict[str, list[bool]]] = {}
    for path in paths:
        with open(path) as f:
            runs = json.load(f)["runs"]
        for flow, row in runs.items():
            for system in ("teola", "LlamaIndex"):
                pooled.setdefault(flow, {}).setdefault(system, []).extend(hits(row, system))
    return {flow: paired_difference(h["teola"], h["LlamaIndex"]) for flow, h in pooled.items()}


def pool_markdown(paths: list[str], command: str) -> str:
    lines = [
        f"## Document QA answer quality, teola vs LlamaIndex, pooled over {len(paths)} runs (issue 22)",
        "",
        f"Command: `{command}`. Runs pooled: {', '.join(f'`{p}`' for p in paths)}. Each run's questions are "
        "disjoint from the others' (python -m bench doc_qa_quality --exclude-seeds); pairs are the two "
        "systems' answers to the same question.",
        "",
    ]
    lines += paired_table(pool(paths))
    return "\n".join(lines) + "\n"


async def _main(args: argparse.Namespace, command: str) -> dict[str, Any]:
    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    names = args.apps.split(",")
    apps = make_apps(tuple(names))
    for app in apps.values():
        await app.start()
    t0 = time.perf_counter()
    try:
        runs = await measure(
            apps,
            names,
            args.sizes.split(","),
            args.n,
            args.concurrency,
            args.seed,
            (args.exclude_seeds, args.exclude_n),
        )
    finally:
        for app in apps.values():
            await app.stop()
    return {
        "command": command,
        "n": args.n,
        "seed": args.seed,
        "exclude_seeds": args.exclude_seeds,
        "exclude_n": args.exclude_n,
        "runs": runs,
        "seconds": time.perf_counter() - t0,
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench doc_qa_quality`."""
    p.add_argument("--n", type=int, default=40, help="questions per flow (default 40)")
    p.add_argument("--apps", default="naive_rag,advanced_rag")
    p.add_argument("--sizes", default="small,large", help=f"comma-separated subset of {','.join(SIZES)}")
    p.add_argument("--concurrency", type=int, default=8, help="queries in flight per burst (default 8)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--exclude-seeds",
        type=lambda v: [int(x) for x in v.split(",") if x],
        default=[],
        help="leave out questions that the first --exclude-n of these seeds ask (e.g. 0,1)",
    )
    p.add_argument(
        "--exclude-n", type=int, default=100, help="how many questions per excluded seed (default 100)"
    )
    p.add_argument(
        "--pool",
        default="",
        help="comma-separated result JSON files: print their pooled paired totals, run nothing",
    )
    p.add_argument("--out", default="doc_qa_quality")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench doc_qa_quality` (argv: the options given, for its page)."""
    command = "python -m bench doc_qa_quality " + " ".join(argv)
    if args.pool:
        md = pool_markdown(args.pool.split(","), command.strip())
        print(md)
        write_results(
            args.out, {"command": command.strip(), "pooled": pool(args.pool.split(","))}, md, subject="rag"
        )
        return 0
    if args.n < 1 or args.concurrency < 1:
        p.error("--n and --concurrency must be >= 1")
    if bad := [s for s in args.sizes.split(",") if s not in SIZES]:
        p.error(f"--sizes: unknown {bad}; choose from {list(SIZES)}")
    data = asyncio.run(_main(args, command.strip()))
    md = markdown(data)
    write_results(args.out, data, md, subject="rag")
    return 0
