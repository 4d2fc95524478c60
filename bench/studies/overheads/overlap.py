"""Query expansion and indexing overlapped (teola's default graph) vs run in turn (the
`component_order` pass), with and without core binding, on the real engines: does overlapping two
compute-bound engines on shared cores pay off? (issue 22)

The shipped advanced-RAG app, NarrativeQA questions over ~100-chunk documents (the gold story among
28 others), each query run both ways back to back (pairs, alternating which goes first), under the
two engine layouts of `bench.studies.overheads.engine_settings` (the libraries' defaults: no binding, torch's
default threads; teola's choice: vLLM bound to cores 1..C-1, embedder on one thread).

    python -m bench overlap            # 3 queries per layout
    python -m bench overlap --quick    # 1 query per layout
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
from typing import Any

from bench.lib.results import machine, write_results
from bench.lib.tables import machine_facts, num, ratio, table
from bench.lib.workloads import app_query, narrative_qa_queries
from bench.studies.overheads.engine_settings import LAYOUTS, build_app

IN_TURN = {"passes": {"component_order": {"order": [["query_expansion", "indexing"]]}}}
MODES = {"overlapped": {}, "in turn": IN_TURN}


def span(trace: list[dict[str, Any]], prefix: str) -> float:
    """Seconds from the first start to the last finish of a component's engine primitives."""
    ts = [
        t
        for t in trace
        if t["primitive"].startswith(prefix) and t.get("started") is not None and t.get("engine") is not None
    ]
    return max(t["finished"] for t in ts) - min(t["started"] for t in ts) if ts else 0.0


async def measure(layout: str, n: int, seed: int) -> dict[str, Any]:
    app = build_app(LAYOUTS[layout])
    queries = [app_query(q) for q in narrative_qa_queries(n + 1, distractors=28, seed=seed)]
    await app.start()
    rows: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    try:
        await app.run(queries[-1])  # warm-up, not counted
        for i, q in enumerate(queries[:n]):
            order = list(MODES) if i % 2 == 0 else list(reversed(MODES))
            for mode in order:
                r = await app.run(q, MODES[mode])
                rows[mode].append(
                    {
                        "latency": r.latency,
                        "expansion": span(r.trace, "query_expansion."),
                        "indexing": span(r.trace, "indexing."),
                    }
                )
                print(f"[overlap] {layout} / {mode}: {r.latency:.2f} s", flush=True)
    finally:
        await app.stop()
    return rows


def markdown(data: dict[str, Any], command: str) -> str:
    m = data["machine"]
    lines = [
        "## Expansion and indexing: overlapped vs in turn, with and without core binding",
        "",
        f"Command: `{command}`. {machine_facts(m)} " + (__doc__ or "").split("\n\n")[1].replace("\n", " "),
        "",
    ]
    cells = []
    for layout, rows in data["layouts"].items():
        base = statistics.fmean(r["latency"] for r in rows["overlapped"])
        for mode, rs in rows.items():
            mean = statistics.fmean(r["latency"] for r in rs)
            cells.append(
                [
                    layout,
                    mode,
                    len(rs),
                    num(mean, 2),
                    num(statistics.fmean(r["expansion"] for r in rs), 2),
                    num(statistics.fmean(r["indexing"] for r in rs), 2),
                    "" if mode == "overlapped" else ratio(mean, base),
                ]
            )
    lines += table(
        [
            "layout",
            "mode",
            "n",
            "mean latency (s)",
            "expansion span (s)",
            "indexing span (s)",
            "in turn / overlapped",
        ],
        cells,
    )
    lines += ["", "A ratio above 1 means running the two in turn is slower, i.e. overlapping them helps."]
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench overlap`."""
    p.add_argument("--quick", action="store_true", help="1 query per layout")
    p.add_argument("--seed", type=int, default=0)


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench overlap` (argv: the options given, for its page)."""
    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    n = 1 if args.quick else 3
    data: dict[str, Any] = {"machine": machine(), "layouts": {}}
    for layout in LAYOUTS:
        data["layouts"][layout] = asyncio.run(measure(layout, n, args.seed))
    command = "python -m bench overlap" + (" --quick" if args.quick else "")
    write_results("overlap", {"layouts": data["layouts"]}, markdown(data, command), subject="overheads")
    return 0
