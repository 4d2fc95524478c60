"""End-to-end document QA against the Teola paper's baselines (§7, Figs. 8-11), on the real engines.

Systems, all on the SAME engine instances (vLLM on CPU with SmolLM2-135M, MiniLM, embedded pgvector,
the reranker), started once; only the compile config and the batching policy change between runs:
  teola           all four optimization passes, topology-aware batching;
  LlamaDist-PO/TO module-level chain run to completion (module_chain pass, every optimization off),
                  per-invocation (PO) or throughput-oriented (TO) batching;
  LlamaDistPC-PO/TO the template's own parallel modules run in parallel (no module chain, every
                  optimization off) + vLLM prefix caching (on for every system), PO or TO;
  LlamaIndex      the real LlamaIndex library (optional extra `llamaindex`) running the same apps
                  with its own abstractions over the same engine adapter instances, bypassing teola's
                  runtime (bench/baselines/llamaindex_rag.py says what is LlamaIndex and what is ours). If
                  llama-index-core is not installed this system is skipped, and the results say so.
Apps: naive RAG and advanced RAG (apps/), document QA workloads (bench/lib/workloads.py) at a low and a
high Poisson rate. The vLLM prefix cache is emptied before every system's trace so no system
inherits another's cached prompts. Each (app, rate, system) trace runs `--trials` times, trial k
with seed + k for its queries and arrivals (every system sees the same ones); speedups are reported
as the mean over trials of each trial's ratio with the min-max and std over trials.

Per query: end-to-end latency from arrival (compile + queueing + execution); the critical-path lower
bound = longest path of the query's teola e-graph weighted by each primitive's started->finished time
when the query ran alone with teola's config, or, for an engine that runs one batch at a time, the
time it spent on the query's batches plus the shortest path before and after them, whichever is
larger (`critical_path_bound`); actual / bound. Per system: latency mean / p50 / p99,
per-op execution and queueing time. For teola: the shares of compile, queueing, execution and
scheduling/communication along each query's actual critical path (Fig. 11). Ablations (Figs. 9-10) on
advanced RAG: parallelization passes (dependency pruning + prefill split) off, pipelining passes
(stage decomposition + decode pipelining) off, topology-aware batching off (blind FIFO batching);
alone (single query) and under the high rate.

Run: .venv/bin/python -m bench.studies.rag.rag [--quick] [--trials N] [--apps A,B] [--systems S,T]
(or `teola bench rag [--quick]`). The full suite (2 trials, 6 systems, ablations) is sized to finish
in under 30 minutes on the 2-core machine; --quick (one rate, 2 queries, 1 trial, no ablations,
teola + LlamaDist-PO + LlamaDistPC-TO + LlamaIndex) in under 5 minutes including engine start-up.
Writes bench/results/rag/rag.{json,md} and rag_*.png (--quick: bench/results/rag/quick/). rag.json, the raw
per-query traces, is over 200 KB and not committed: this command regenerates it.

This module is the entry point; beside it: rag_setup (systems, ablations, rates, settings, the apps),
rag_runs (one query, a trace, the isolated runs, LlamaIndex), rag_analysis (the bound, Fig. 11 shares,
summaries, speedups), rag_suite (the suite), rag_page (the markdown) and rag_plots.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.lib.results import command_line, without_keys
from bench.studies.rag.rag_analysis import speedups
from bench.studies.rag.rag_page import markdown
from bench.studies.rag.rag_plots import plots
from bench.studies.rag.rag_setup import ALL_SYSTEMS, RATES, Settings, make_apps
from bench.studies.rag.rag_suite import bench


def strip_records(data: dict[str, Any]) -> dict[str, Any]:
    """The JSON keeps per-query latencies and traces but not the e-graph parent lists (large)."""
    return without_keys(data, "parents")


# ---- entry point --------------------------------------------------------------------------------
async def _main(s: Settings, quick: bool, command: str, write: bool) -> dict[str, Any]:
    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    t0 = time.perf_counter()
    apps = make_apps(s.apps)
    for app in apps.values():
        await app.start()
    startup = time.perf_counter() - t0
    try:
        data = await bench(apps, s)
    finally:
        for app in apps.values():
            await app.stop()
    data["startup_seconds"] = startup
    data["quick"] = quick
    if write:
        from bench.lib.results import machine, results_dir

        data["machine"] = machine()
        md = markdown(data, command)
        here = results_dir("rag")
        folder = here / "quick" if quick else here  # quick runs stay out of the index
        folder.mkdir(parents=True, exist_ok=True)
        plots(data, folder / "rag")
        (folder / "rag.json").write_text(json.dumps(strip_records(data), indent=1, default=str))
        (folder / "rag.md").write_text(md.rstrip() + "\n")
        print(md)
    return data


def render(path: Path, note: str | None) -> int:
    """Rewrite <name>.md and the plots next to a results JSON from its recorded summaries."""
    data = json.loads(path.read_text())
    if note:
        data["load_note"] = note
        path.write_text(json.dumps(data, indent=1, default=str))
    command = "python -m bench.studies.rag.rag" + (" --quick" if data.get("quick") else "")
    md = markdown(data, command)
    plots(data, path.with_suffix(""))
    path.with_suffix(".md").write_text(md.rstrip() + "\n")
    print(md)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.studies.rag.rag", description=__doc__.split("\n")[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="one rate, 2 queries per app, 1 trial, no ablations, one baseline of each kind "
        "(<5 min with engine start-up)",
    )
    p.add_argument("--apps", default=None, help="comma-separated subset of naive_rag,advanced_rag")
    p.add_argument(
        "--systems",
        default=None,
        help=f"comma-separated subset of {','.join(ALL_SYSTEMS)} (teola is "
        "always run: speedups are relative to it)",
    )
    p.add_argument(
        "--trials",
        type=int,
        default=None,
        help="runs of each (app, rate, system) trace with seeds seed..seed+N-1 (default 2; --quick 1)",
    )
    p.add_argument("--no-write", action="store_true", help="print a summary, write no result files")
    p.add_argument(
        "--render", metavar="JSON", help="re-render the markdown and plots from a results JSON (no runs)"
    )
    p.add_argument("--note", default=None, help="with --render: a note on machine load to include")
    args = p.parse_args(argv)
    if args.render:
        return render(Path(args.render), args.note)
    s = Settings.quick() if args.quick else Settings()
    if args.apps:
        s.apps = tuple(a.strip() for a in args.apps.split(",") if a.strip())
        unknown = [a for a in s.apps if a not in RATES]
        if unknown:
            p.error(f"unknown app(s) {unknown}; known: {sorted(RATES)}")
    if args.systems:
        chosen = [x.strip() for x in args.systems.split(",") if x.strip()]
        unknown = [x for x in chosen if x not in ALL_SYSTEMS]
        if unknown:
            p.error(f"unknown system(s) {unknown}; known: {list(ALL_SYSTEMS)}")
        s.systems = tuple(x for x in ALL_SYSTEMS if x == "teola" or x in chosen)
    if args.trials is not None:
        if args.trials < 1:
            p.error(f"--trials must be >= 1, got {args.trials}")
        s.trials = args.trials
    command = command_line(
        "python -m bench.studies.rag.rag",
        (
            ("--quick", args.quick),
            ("--apps", args.apps),
            ("--systems", args.systems),
            ("--trials", args.trials),
        ),
    )
    data = asyncio.run(_main(s, args.quick, command, not args.no_write))
    if args.no_write:
        print(json.dumps(speedups(data), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
