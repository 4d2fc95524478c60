"""SIMULATED: Teola's Fig. 8-10 set-up at GPU scale, on derived GPU profiles (teola.sim).

    python -m bench.sim_paper [--profile a100-llama2-7b] [--queries 200] [--quick]

Every number here is simulated: teola's unchanged runtime (passes, graph and engine schedulers,
policies) on simulated engines in virtual time, with a profile derived from published GPU and model
figures (engines/profiles/<profile>.json says where each number comes from); none is measured.
The simulator's own measured error on this machine is in bench/results/sim_fidelity.md.

1. Latency vs rate (Fig. 8): naive RAG, advanced RAG and search-augmented generation; teola vs
   LlamaDist / LlamaDistPC with per-invocation (PO) and throughput-oriented (TO) batching; the
   rates are fractions of each app's teola capacity (queries/s it completes when offered far more).
2. Ablations (Figs. 9-10) on advanced RAG: without parallelization, without pipelining, and
   blind FIFO batching instead of topology-aware batching.
3. Scale-out: advanced RAG on 1..64 LLM instances (other engines scaled 1 per 8 LLM instances),
   offered 0.8x the simulated 1-instance capacity times the instance count: throughput and p99;
   10,000 queries at 64 instances, and the wall time the simulator took for them.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import write_results
from bench.rag import ABLATIONS, SYSTEMS
from bench.workloads import app_query, doc_qa_queries

APPS = ("naive_rag", "advanced_rag", "search_generation")
FRACTIONS = (0.2, 0.4, 0.6, 0.8, 0.95)


def build(name: str) -> Any:
    import importlib
    return importlib.import_module(f"apps.{name}").build()


def queries(name: str, n: int) -> list[dict[str, Any]]:
    qs = [app_query(q) for q in doc_qa_queries(min(n, 400), 10, "truthfulqa", 0)]
    if name == "search_generation":
        qs = [{"question": q["question"]} for q in qs]
    return [qs[i % len(qs)] | ({"question": f"{qs[i % len(qs)]['question']} (user {i})"}) for i in range(n)]


def run(name: str, profile: str, rate: float, n: int, system: tuple[dict, str], instances: dict | None = None,
        seed: int = 0) -> dict[str, Any]:
    from teola.sim.run import simulate
    config, policy = system
    report = simulate(build(name), profile, rate, queries(name, n), instances, {**config, "policy": policy}, seed)
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
                print(f"[sim_paper] {name} {f:.2f}x {system}: mean {s['mean_s']:.2f} s", file=sys.stderr, flush=True)
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
        rows.append({"llm_instances": k, "offered_qps": 0.8 * one * k, **_brief(s), "wall_s": s["wall_s"],
                     "primitives": s["primitives"], "primitives_per_wall_s": s["primitives_per_wall_s"]})
        print(f"[sim_paper] scale-out {k}: {s['throughput_qps']:.1f} q/s, p99 {s['p99_s']:.2f} s, "
              f"{s['wall_s']:.1f} s wall", file=sys.stderr, flush=True)
    return {"one_instance_capacity_qps": one, "rows": rows}


def _brief(s: dict[str, Any]) -> dict[str, Any]:
    return {k: s[k] for k in ("queries", "failed", "mean_s", "p50_s", "p99_s", "throughput_qps")}


def markdown(data: dict[str, Any]) -> str:
    from bench.sim_paper_report import report
    return report(data)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.sim_paper", description="SIMULATED Teola Fig. 8-10 and scale-out")
    p.add_argument("--profile", default="a100-llama2-7b")
    p.add_argument("--queries", type=int, default=200, help="queries per point (default 200)")
    p.add_argument("--quick", action="store_true", help="naive RAG, 2 systems, 40 queries, scale-out to 4")
    p.add_argument("--out", default="sim_paper")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    n = 40 if args.quick else args.queries
    apps = ("naive_rag",) if args.quick else APPS
    systems = ("teola", "LlamaDist-PO") if args.quick else tuple(SYSTEMS)
    data = {"profile": args.profile, "queries": n, "curves": latency_vs_rate(args.profile, n, apps, systems),
            "ablations": None if args.quick else ablations(args.profile, n),
            "scale_out": scale_out(args.profile, (1, 2, 4) if args.quick else (1, 2, 4, 8, 16, 32, 64),
                                   200 if args.quick else 10_000)}
    data["wall_s"] = time.perf_counter() - t0
    data["command"] = "python -m bench.sim_paper " + " ".join(argv if argv is not None else sys.argv[1:])
    write_results(args.out, data, markdown(data))
    from bench.common import RESULTS
    from bench.sim_paper_plots import plots
    for path in plots(data, RESULTS / args.out):
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
