"""Pool separate `bench.studies.rag.doc_qa` runs (trials) into one results section with trial spread and
verdicts.

    python -m bench doc_qa_trials --runs doc_qa_large_t0,doc_qa_large_t1,doc_qa_large_t2 \\
        --out doc_qa_large_trials

Each run is one trial: `python -m bench doc_qa ... --trial k` draws its Poisson arrivals with seed + k
over the same queries, and sets its rates as fractions of LlamaIndex's mean latency alone in that run,
so a trial on a slower machine offers the same relative load. Points are pooled by that fraction.
Reported per flow and load: teola's speedup over LlamaIndex as the mean over trials of each trial's
mean-latency ratio with its min-max and std, the verdict of bench.studies.rag.rag_analysis.verdict (faster \
/ slower only if
every trial agrees), p50 / p99 ratios over the pooled queries; latency, LLM work, answer quality and
retrieval recall per system; and where the time goes (seconds per query with an engine call of each op
executing, and queued in teola's engine queues; LlamaIndex calls engines directly, so it queues in
none of teola's queues).
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from bench.lib.plots import write_load_plot
from bench.lib.results import results_dir, write_results
from bench.studies.rag.doc_qa_runs import summarize
from bench.studies.rag.doc_qa_systems import BASELINES, SYSTEMS
from bench.studies.rag.doc_qa_trials_page import (
    by_op_lines,
    equal_work_lines,
    header_lines,
    inflight_lines,
    latency_lines,
    load_key,
    speedup_lines,
    time_lines,
)


def _systems(row: dict[str, Any]) -> list[str]:
    return [k for k in row if isinstance(row[k], dict) and "records" in row[k]]


def pool(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """doc_qa results of several trials -> {"apps": {flow: {"runs": {point: {system: entry}}}}}, the
    shape bench.studies.rag.rag_analysis.speedups reads. An entry has the pooled records' `summary`, each
    trial's `trials[k]["summary"]` and the trials' offered rates (q/s; None alone). Only the flows, points and
    systems every trial ran are pooled."""
    flows = set.intersection(*(set(t["runs"]) for t in trials)) if trials else set()
    apps: dict[str, Any] = {}
    for flow in sorted(flows):
        points = set.intersection(*(set(t["runs"][flow]) for t in trials))
        runs: dict[str, Any] = {}
        for point in sorted(points, key=load_key):
            rows = [t["runs"][flow][point] for t in trials]
            systems = [s for s in _systems(rows[0]) if all(s in r for r in rows)]
            runs[point] = {}
            for system in systems:
                per = [r[system]["records"] for r in rows]
                alone = [t["runs"][flow].get("alone", {}).get(system, {}).get("records", []) for t in trials]
                runs[point][system] = {
                    "summary": summarize([rec for recs in per for rec in recs]),
                    "trials": [{"summary": summarize(recs)} for recs in per],
                    "rates": [r.get("rate") for r in rows],
                    "critical_path": critical_path_means(rec for recs in per for rec in recs),
                    "bound_ratio": bound_ratio(per, alone),
                    "tokens_per_decode_step": tokens_per_step([r[system] for r in rows]),
                    "server_inflight": [r[system].get("server_inflight") or {} for r in rows],
                }
        apps[flow] = {"runs": runs}
    return {"apps": apps}


def critical_path_means(records: Any) -> dict[str, float] | None:
    """Mean Fig. 11 shares (bench.studies.rag.rag_analysis.critical_path_shares) over the records that carry
    them."""
    shares = [r["critical_path"] for r in records if r.get("critical_path")]
    return {k: statistics.fmean(c[k] for c in shares) for k in shares[0]} if shares else None


def bound_ratio(per_trial: list[list[dict[str, Any]]], alone: list[list[dict[str, Any]]]) -> float | None:
    """Mean actual latency / critical-path bound, for the queries that also ran alone in the same
    trial (record i is query i in both lists): the bound is that query's e-graph weighted by its
    primitives' times when it ran alone."""
    ratios = [
        rec["latency"] / a["bound"]
        for recs, al in zip(per_trial, alone)
        for rec, a in zip(recs, al)
        if rec.get("ok") and a.get("bound")
    ]
    return statistics.fmean(ratios) if ratios else None


def tokens_per_step(entries: list[dict[str, Any]]) -> float | None:
    """vLLM's generated tokens per decode step over the trials that counted engine steps."""
    steps = [e["vllm_steps"] for e in entries if e.get("vllm_steps", {}).get("decode_steps")]
    return (
        sum(x["generated_tokens"] for x in steps) / sum(x["decode_steps"] for x in steps) if steps else None
    )


def markdown(trials: list[dict[str, Any]], names: list[str], command: str) -> str:
    """The pooled page of the trials: its sections (bench.studies.rag.doc_qa_trials_page) over the pooled
    runs."""
    pooled = pool(trials)
    order = {name: i for i, name in enumerate((*SYSTEMS, *BASELINES))}
    lines = (
        header_lines(trials, names, command, pooled, __doc__ or "")
        + speedup_lines(pooled, order)
        + equal_work_lines(pooled)
    )
    lines += (
        latency_lines(pooled)
        + time_lines(trials, pooled, order)
        + inflight_lines(pooled)
        + by_op_lines(pooled)
    )
    return "\n".join(lines).rstrip() + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench doc_qa_trials`."""
    p.add_argument(
        "--runs",
        required=True,
        help="comma-separated bench/results names, one bench.studies.rag.doc_qa run per trial",
    )
    p.add_argument(
        "--out", required=True, help="results name for the pooled section: bench/results/rag/<out>.md/.json"
    )


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench doc_qa_trials` (argv: the options given, for its page)."""
    names = [n.strip() for n in args.runs.split(",") if n.strip()]
    folder = results_dir("rag")
    missing = [n for n in names if not (folder / f"{n}.json").exists()]
    if missing:
        p.error(f"no results file for {', '.join(missing)} in {folder}")
    trials = [json.loads((folder / f"{n}.json").read_text()) for n in names]
    seeds = [t["settings"]["seed"] + t["settings"].get("trial", 0) for t in trials]
    if len(set(seeds)) < len(seeds):
        p.error(f"runs {names} repeat a Poisson seed ({seeds}): run each trial with its own --trial")
    if any(
        set(_systems(row)) - set(SYSTEMS)
        for t in trials
        for runs in t["runs"].values()
        for row in runs.values()
    ):
        print("[doc_qa_trials] note: systems beyond teola and LlamaIndex are pooled too", flush=True)
    command = "python -m bench doc_qa_trials " + " ".join(argv)
    md = markdown(trials, names, command.strip())
    write_results(args.out, {"runs": names, "pooled": pool(trials)}, md, compact=True, subject="rag")
    write_load_plot(args.out, folder)
    return 0
