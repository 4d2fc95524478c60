"""SIMULATED: SamuLLM's planner vs its heuristics at the paper's scale (8 GPUs, its four app types),
on the derived A100 Llama-2 7B / 13B profiles (engines/profiles/, parallel sections derived, not
measured) with output lengths sampled from SmolLM2-135M's recorded stage lengths
(engines/profiles/lengths-smollm2-135m-rag.json: its RAG apps' call lengths mapped to the
planner's stages, capped at each model's max_tokens; the job-prompt lengths bench/plan_lengths.py records
are in lengths-smollm2-135m.json).

    python -m bench.plan_studies --study sim [--quick]

Per job: predicted completion time (loading included) of the greedy plan, the max heuristic (all
GPUs to one model at a time) and the min heuristic (as many models as possible, GPUs split evenly),
the greedy's speed-up over each, and the planners' search time on this machine.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import write_results
from engines.sim.profile import PROFILE_DIR
from teola.plan.job import parse_job
from teola.plan.search import plan_stages
from teola.plan.workload import build_workload

P7, P13 = "a100-llama2-7b", "a100-llama2-13b"
LENGTHS = "lengths-smollm2-135m-rag"  # the lengths this study was run with (RAG-call lengths mapped to stages)


def _m(profile: str, max_tokens: int, lengths: str | None = None) -> dict[str, Any]:
    return {"profile": profile, "max_tokens": max_tokens, **({"lengths": lengths} if lengths else {})}


def ensembling(n: int, max_tokens: int) -> dict[str, Any]:
    models = {"7b-a": _m(P7, max_tokens), "7b-b": _m(P7, max_tokens, "answer_sampled"), "7b-c": _m(P7, max_tokens),
              "13b-a": _m(P13, max_tokens), "13b-b": _m(P13, max_tokens, "answer_sampled"), "fuser": _m(P13, 256)}
    return {"name": f"ensembling-{n}-{max_tokens}", "app": "ensembling", "dataset": "nq_open", "requests": n,
            "models": models, "answerers": [m for m in models if m != "fuser"], "fuser": "fuser", "lengths": LENGTHS}


def routing(n: int) -> dict[str, Any]:
    shares = {"7b-a": 0.45, "13b-a": 0.25, "7b-b": 0.15, "13b-b": 0.1, "7b-c": 0.05}  # uneven, as RouterBench's
    return {"name": f"routing-{n}", "app": "routing", "dataset": "nq_open", "requests": n, "routes": shares,
            "models": {m: _m(P13 if m.startswith("13b") else P7, 1024, "answer_sampled") for m in shares},
            "lengths": LENGTHS}


def chain(docs: int, evaluations: int, prefix: str = "") -> dict[str, Any]:
    return {"name": f"chain-{docs}-{evaluations}", "app": "chain_summary", "dataset": "multilexsum",
            "documents": docs, "chunk_words": 300, "evaluations": evaluations,
            "summariser": f"{prefix}summariser", "evaluator": f"{prefix}evaluator",
            "models": {f"{prefix}summariser": _m(P13, 256), f"{prefix}evaluator": _m(P13, 64)}, "lengths": LENGTHS}


def mix(docs: int, n: int) -> dict[str, Any]:
    return {"name": f"mix-{docs}-{n}", "app": "mix", "lengths": LENGTHS,
            "parts": [chain(docs, 4), ensembling(n, 256)]}


def jobs(quick: bool) -> list[dict[str, Any]]:
    if quick:
        return [ensembling(300, 256), routing(600), chain(40, 2), mix(40, 300)]
    return [ensembling(1000, 256), ensembling(3000, 256), ensembling(1000, 512), routing(2000), routing(3500),
            chain(100, 2), chain(300, 4), mix(100, 1000), mix(300, 3000)]


def run(spec: dict[str, Any]) -> dict[str, Any]:
    job = parse_job(spec)
    t0 = time.perf_counter()
    wl = build_workload(job)
    build_s = time.perf_counter() - t0
    row: dict[str, Any] = {"job": job.name, "app": job.app, "requests": wl.total_requests(),
                           "models": len(wl.models), "build_s": round(build_s, 3)}
    for method in ("greedy", "max", "min"):
        s = plan_stages(wl, 8, method)
        row[method] = {"completion_s": round(s.completion_s, 1), "search_s": round(s.search_s, 3),
                       "stages": len(s.stages), "simulations": s.simulations}
    g = row["greedy"]["completion_s"]
    row["speedup_vs_max"] = round(row["max"]["completion_s"] / g, 3)
    row["speedup_vs_min"] = round(row["min"]["completion_s"] / g, 3)
    row["speedup_vs_better"] = min(row["speedup_vs_max"], row["speedup_vs_min"])
    print(f"{job.name}: {row['greedy']} max {row['max']['completion_s']} min {row['min']['completion_s']}", flush=True)
    return row


def markdown(data: dict[str, Any]) -> str:
    lines = ["## SIMULATED: offline multi-LLM jobs planned by SamuLLM's greedy search vs its heuristics", "",
             f"SIMULATED, not measured: 8 GPUs of the derived A100 profiles ({P7}, {P13}; tensor-parallel and "
             "loading costs derived, see the profiles' source), output lengths sampled from SmolLM2-135M's "
             f"recorded stage lengths ({LENGTHS}: {data['lengths_source']}; a stage without recorded lengths "
             "decodes its max_tokens). Completion times are predictions of teola's planner "
             "simulation (loading included); search time is measured on this machine. "
             f"`{data['command']}`", "",
             "| job | requests | greedy s | max s | min s | vs max | vs min | vs better | search s (greedy / max / min) | stages |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in data["rows"]:
        lines.append(f"| {r['job']} | {r['requests']} | {r['greedy']['completion_s']} | {r['max']['completion_s']} | "
                     f"{r['min']['completion_s']} | {r['speedup_vs_max']}x | {r['speedup_vs_min']}x | "
                     f"{r['speedup_vs_better']}x | {r['greedy']['search_s']} / {r['max']['search_s']} / "
                     f"{r['min']['search_s']} | {r['greedy']['stages']} |")
    s = data["summary"]
    lines += ["", f"Mean speed-up of the greedy plan over the better heuristic: {s['mean_vs_better']}x "
              f"(over max {s['mean_vs_max']}x, over min {s['mean_vs_min']}x); greedy search time "
              f"{s['greedy_search_s_max']} s at most."]
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench.plan_studies --study sim`."""
    p.add_argument("--quick", action="store_true", help="four small jobs")
    p.add_argument("--out", default="plan_study")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench.plan_studies --study sim` (argv: the options given, for its page)."""
    rows = [run(spec) for spec in jobs(args.quick)]
    recorded = json.loads((PROFILE_DIR / f"{LENGTHS}.json").read_text(encoding="utf-8"))
    data = {"simulated": True, "gpus": 8, "rows": rows, "lengths_source": recorded["source"],
            "command": "python -m bench.plan_studies --study sim " + " ".join(argv),
            "summary": {"mean_vs_better": round(statistics.fmean(r["speedup_vs_better"] for r in rows), 3),
                        "mean_vs_max": round(statistics.fmean(r["speedup_vs_max"] for r in rows), 3),
                        "mean_vs_min": round(statistics.fmean(r["speedup_vs_min"] for r in rows), 3),
                        "greedy_search_s_max": max(r["greedy"]["search_s"] for r in rows)}}
    write_results(args.out, data, markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit("moved: python -m bench.plan_studies --study sim (docs/benchmarks.md)")
