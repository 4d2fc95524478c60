"""SIMULATED: Teola's Fig. 8-10 set-up at GPU scale, on derived GPU profiles (teola.sim).

    python -m bench sim_paper [--profile a100-llama2-7b-measured] [--queries 200] [--quick] [--docs large]
    python -m bench sim_paper --fig8 [--queries 200] [--quick]   (bench/studies/sim/sim_paper_fig8.py)

Every number here is simulated: teola's unchanged runtime (passes, graph and engine schedulers,
policies) on simulated engines in virtual time, with a profile derived from published GPU and model
figures (engines/profiles/<profile>.json says where each number comes from); none is measured.
The simulator's own measured error on this machine is in bench/results/sim/sim_fidelity_probe.md.

1. Latency vs rate (Fig. 8): naive RAG, advanced RAG and search-augmented generation; teola vs
   LlamaDist / LlamaDistPC with per-invocation (PO) and throughput-oriented (TO) batching; the
   rates are fractions of each app's teola capacity (queries/s it completes when offered far more).
2. Ablations (Figs. 9-10) on advanced RAG: without parallelization, without pipelining, and
   blind FIFO batching instead of topology-aware batching.
3. Scale-out: advanced RAG on 1..64 LLM instances (other engines scaled 1 per 8 LLM instances),
   offered 0.8x the simulated 1-instance capacity times the instance count: throughput and p99;
   10,000 queries at 64 instances, and the wall time the simulator took for them.

Documents: "small" (default) asks TruthfulQA questions over ten ~1-chunk passages: an index of
11-13 chunks, which top-16 search covers whole, so pass prune_covered_searches drops advanced RAG's
expansion and the ablations have nothing to act on. "large" asks NarrativeQA questions over the gold
story and 28 others (~100 chunks of 256 tokens, the Teola paper's large-document regime): expansion,
its searches and the indexing they overlap with all run, with advanced RAG's reranker declared a
cross-encoder (as the paper's; see CROSS_ENCODER). Large runs the two RAG apps' curves and the
ablations; scale-out only with --scale-out.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bench.lib.results import write_results
from bench.lib.workloads import app_query, doc_qa_queries, narrative_qa_queries
from bench.studies.rag.rag_setup import ABLATIONS, SYSTEMS

APPS = ("naive_rag", "advanced_rag", "search_generation")
FRACTIONS = (0.2, 0.4, 0.6, 0.8, 0.95)
DOCS = ("small", "large")
LARGE_DISTRACTORS = 28  # stories beside the gold one: ~100 chunks, as bench.studies.rag.doc_qa's "large"
_docs = "small"  # set once by main(); every run of one invocation uses the same documents


# The paper's advanced RAG reranks with a cross-encoder (the GPU profile's reranker is bge-class).
# With the offline default (the cosine of the question's own embedding) pass prune_covered_searches
# proves the expansion useless at any document size, so large documents use the cross-encoder kind.
CROSS_ENCODER = {"model": "bge-reranker-large"}


def build(name: str) -> Any:
    import importlib

    module = importlib.import_module(f"apps.{name}")
    return (
        module.build(reranker=CROSS_ENCODER)
        if _docs == "large" and name == "advanced_rag"
        else module.build()
    )


def queries(name: str, n: int) -> list[dict[str, Any]]:
    if _docs == "large":
        qs = [app_query(q) for q in narrative_qa_queries(min(n, 400), LARGE_DISTRACTORS, 0)]
    else:
        qs = [app_query(q) for q in doc_qa_queries(min(n, 400), 10, "truthfulqa", 0)]
    if name == "search_generation":
        qs = [{"question": q["question"]} for q in qs]
    return [qs[i % len(qs)] | ({"question": f"{qs[i % len(qs)]['question']} (user {i})"}) for i in range(n)]


def run(
    name: str,
    profile: str,
    rate: float,
    n: int,
    system: tuple[dict, str],
    instances: dict | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    from teola.sim.run import simulate

    config, policy = system
    report = simulate(
        build(name), profile, rate, queries(name, n), instances, {**config, "policy": policy}, seed
    )
    return report.summary()


def capacity(name: str, profile: str, n: int, instances: dict | None = None) -> float:
    """Completed queries/s when n queries arrive almost at once (teola's config)."""
    return run(name, profile, 1000.0, n, SYSTEMS["teola"], instances)["throughput_qps"]


def latency_vs_rate(profile: str, n: int, apps: tuple[str, ...], systems: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in apps:
        cap = capacity(name, profile, n)
        rows = []
        for f in FRACTIONS:
            for system in systems:
                s = run(name, profile, f * cap, n, SYSTEMS[system])
                rows.append({"fraction": f, "rate": f * cap, "system": system, **_brief(s)})
                print(
                    f"[sim_paper] {name} {f:.2f}x {system}: mean {s['mean_s']:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
        out[name] = {"capacity_qps": cap, "rows": rows}
    return out


def ablations(profile: str, n: int) -> dict[str, Any]:
    cap = capacity("advanced_rag", profile, n)
    rows = []
    for f in (0.0, 0.6):
        rate = f * cap if f else cap / n / 50  # "alone": arrivals far apart
        for variant, system in (("teola", SYSTEMS["teola"]), *ABLATIONS.items()):
            s = run("advanced_rag", profile, rate, n if f else 20, system)
            rows.append({"load": f"{f:.1f}x capacity" if f else "alone", "variant": variant, **_brief(s)})
    return {"capacity_qps": cap, "rows": rows}


def scale_out(profile: str, counts: tuple[int, ...], at_max: int) -> dict[str, Any]:
    """`at_max` queries at the largest instance count, proportionally fewer (>= 100) below."""
    one = capacity("advanced_rag", profile, 100)
    rows = []
    for k in counts:
        inst = {"llm": k, "embedding": max(1, k // 8), "reranker": max(1, k // 8), "vectordb": max(1, k // 8)}
        n = max(100, round(at_max * k / max(counts)))
        s = run("advanced_rag", profile, 0.8 * one * k, n, SYSTEMS["teola"], inst)
        rows.append(
            {
                "llm_instances": k,
                "offered_qps": 0.8 * one * k,
                **_brief(s),
                "wall_s": s["wall_s"],
                "primitives": s["primitives"],
                "primitives_per_wall_s": s["primitives_per_wall_s"],
            }
        )
        print(
            f"[sim_paper] scale-out {k}: {s['throughput_qps']:.1f} q/s, p99 {s['p99_s']:.2f} s, "
            f"{s['wall_s']:.1f} s wall",
            file=sys.stderr,
            flush=True,
        )
    return {"one_instance_capacity_qps": one, "rows": rows}


def _brief(s: dict[str, Any]) -> dict[str, Any]:
    return {k: s[k] for k in ("queries", "failed", "mean_s", "p50_s", "p99_s", "throughput_qps")}


def markdown(data: dict[str, Any]) -> str:
    from bench.studies.sim.sim_paper_report import report

    return report(data)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench sim_paper`."""
    p.add_argument(
        "--profile",
        default="a100-llama2-7b-measured",
        help="simulation profile (default: built from measured A100 operators, "
        "bench/results/sim/gpu_profiles.md)",
    )
    p.add_argument("--queries", type=int, default=200, help="queries per point (default 200)")
    p.add_argument("--quick", action="store_true", help="naive RAG, 2 systems, 40 queries, scale-out to 4")
    p.add_argument("--docs", choices=DOCS, default="small", help="document size (see the module docstring)")
    p.add_argument("--scale-out", action="store_true", help="with --docs large, also run the scale-out sweep")
    p.add_argument(
        "--fig8",
        action="store_true",
        help="Fig. 8's document-QA rows at the paper's set-up with the mechanism analysis "
        "(bench/studies/sim/sim_paper_fig8.py; page sim_teola_paper)",
    )
    p.add_argument(
        "--out", default=None, help="results name (default sim_paper, sim_paper_large with --docs large)"
    )


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench sim_paper` (argv: the options given, for its page)."""
    if args.fig8:
        return _fig8(args, argv)
    global _docs
    _docs = args.docs
    out = args.out or ("sim_paper_large" if args.docs == "large" else "sim_paper")
    t0 = time.perf_counter()
    n = 40 if args.quick else args.queries
    apps = ("naive_rag",) if args.quick else APPS if args.docs == "small" else APPS[:2]
    systems = ("teola", "LlamaDist-PO") if args.quick else tuple(SYSTEMS)
    scale = args.docs == "small" or args.scale_out
    data = {
        "profile": args.profile,
        "queries": n,
        "docs": args.docs,
        "curves": latency_vs_rate(args.profile, n, apps, systems),
        "ablations": None if args.quick else ablations(args.profile, n),
        "scale_out": None
        if not scale
        else scale_out(
            args.profile, (1, 2, 4) if args.quick else (1, 2, 4, 8, 16, 32, 64), 200 if args.quick else 10_000
        ),
    }
    data["wall_s"] = time.perf_counter() - t0
    data["command"] = "python -m bench sim_paper " + " ".join(argv)
    write_results(out, data, markdown(data), subject="sim")
    from bench.lib.results import results_dir
    from bench.studies.sim.sim_paper_plots import plots

    for path in plots(data, results_dir("sim") / out):
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _fig8(args: argparse.Namespace, argv: list[str]) -> int:
    from bench.studies.sim.sim_paper_fig8 import slim, study
    from bench.studies.sim.sim_paper_fig8_report import report

    t0 = time.perf_counter()
    data = study(8 if args.quick else args.queries, args.quick)
    data["wall_s"] = time.perf_counter() - t0
    data["command"] = "python -m bench sim_paper " + " ".join(argv)
    write_results(args.out or "sim_teola_paper", slim(data), report(data), subject="sim")
    return 0
