"""The end-to-end RAG suite: per app, warm-up, the trials (isolated runs for the bounds, then every rate's
trace with every system), the pooled summaries and the ablations (Figs. 9-10)."""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import asdict
from typing import Any

from bench.lib.workloads import app_query, doc_qa_queries, poisson_arrivals
from bench.studies.rag.rag_analysis import (
    critical_path_bound,
    critical_path_shares,
    exclusive_engines,
    pipelined_items,
    summarize,
)
from bench.studies.rag.rag_runs import (
    llamaindex_pipeline,
    run_alone,
    run_llamaindex_query,
    run_llamaindex_trace,
    run_query,
    run_trace,
)
from bench.studies.rag.rag_setup import (
    ABLATIONS,
    ALL_SYSTEMS,
    LLAMAINDEX,
    RATES,
    SYSTEMS,
    Settings,
    engine_options,
)


def _pool(entry: dict[str, Any], bounds: list[float]) -> None:
    """Summaries of a system's runs: over all trials' records pooled, and per trial."""
    entry["summary"] = summarize(entry["records"], bounds)
    for k, tr in enumerate(entry["trials"]):
        summary = summarize([r for r in entry["records"] if r["trial"] == k], bounds)
        tr["summary"] = {key: v for key, v in summary.items() if key != "by_op"}


async def bench(apps: dict[str, Any], s: Settings, progress: bool = True) -> dict[str, Any]:
    """Run the suite on started apps; returns the result dict (records included).

    Per app: warm-up, then `s.trials` trials; trial k draws its queries and arrivals with seed
    `s.seed + k`, runs them alone with teola (the critical-path bounds), then every rate's trace
    with every system. Records carry a global index `i` into the app's bounds and their `trial`.
    Ablations use trial 0's queries and arrivals."""
    from tqdm import tqdm

    unknown = [x for x in s.systems if x not in ALL_SYSTEMS]
    if unknown:
        raise ValueError(f"unknown system(s) {unknown}; known: {list(ALL_SYSTEMS)}")
    if s.trials < 1:
        raise ValueError(f"trials must be >= 1, got {s.trials}")
    steps = len(s.apps) * s.trials * (1 + len(s.systems) * len(s.rates))
    if s.ablation_app in s.apps:
        steps += len(s.ablations) * (1 + (s.ablation_load and "high" in s.rates))
    bar = tqdm(total=steps, desc="rag bench", disable=not progress, dynamic_ncols=True)
    out: dict[str, Any] = {
        "settings": asdict(s),
        "rates": {a: RATES[a] for a in s.apps},
        "engine_overrides": engine_options(),
        "apps": {},
        "skipped": {},
    }
    t_start = time.perf_counter()
    for name in s.apps:
        out["apps"][name] = await _app(apps[name], name, s, out["skipped"], bar, t_start)
    bar.close()
    out["wall_seconds"] = time.perf_counter() - t_start
    return out


async def _app(
    app: Any, name: str, s: Settings, skipped: dict[str, Any], bar: Any, t_start: float
) -> dict[str, Any]:
    """One app's part of the result: its isolated runs and bounds, its runs per rate and system, its
    ablations (if it is the ablation app). A LlamaIndex system that cannot run is noted in `skipped`."""
    extra = {"nodes": s.nodes} if s.nodes else {}
    systems = list(s.systems)
    rag = None
    if LLAMAINDEX in systems:
        rag, why = llamaindex_pipeline(app, s.nodes)
        if rag is None:
            skipped[LLAMAINDEX] = why
            print(f"[bench.studies.rag.rag] {name}: system {LLAMAINDEX} skipped: {why}", file=sys.stderr)
            systems.remove(LLAMAINDEX)
            bar.update(s.trials * len(s.rates))
    res: dict[str, Any] = {"isolated": None, "runs": {}, "ablations": {}}
    if s.warmup:
        bar.set_postfix_str(f"{name} warm-up")
        warm = doc_qa_queries(1, s.passages, s.source, s.seed + 1000)
        for cfg, pol in (SYSTEMS["teola"], SYSTEMS["LlamaDist-PO"])[: s.warmup_configs]:
            await run_query(app, app_query(warm[0]), cfg, pol, extra=extra)
        if rag is not None:
            await run_llamaindex_query(rag, warm[0])
    iso_all: list[dict[str, Any]] = []
    bounds: list[float] = []
    trial0: dict[str, Any] = {}
    for k in range(s.trials):
        queries, iso = await _trial(app, name, s, k, systems, rag, res["runs"], bounds, bar)
        iso_all += iso
        if k == 0:
            trial0 = {"queries": queries, "iso": iso}
    res["isolated"] = {"records": iso_all, "bounds": bounds, "summary": summarize(iso_all, bounds)}
    _pool_runs(res["runs"], bounds)
    if name == s.ablation_app:
        await _ablations(app, name, s, trial0, res, bounds, t_start, bar)
    return res


async def _trial(
    app: Any,
    name: str,
    s: Settings,
    k: int,
    systems: list[str],
    rag: Any,
    runs: dict[str, Any],
    bounds: list[float],
    bar: Any,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Trial k of one app: its queries alone with teola (their bounds appended to `bounds`), then every
    rate's trace with every system (records added to `runs`); returns (queries, isolated records)."""
    extra = {"nodes": s.nodes} if s.nodes else {}
    n_max = max(s.n_queries[r] for r in s.rates)
    seed, offset = s.seed + k, k * n_max
    queries = doc_qa_queries(n_max, s.passages, s.source, seed)
    bar.set_postfix_str(f"{name} trial {k} isolated")
    iso = await run_alone(app, queries, *SYSTEMS["teola"], extra, offset)
    for r in iso:
        r["trial"] = k
    excl = exclusive_engines(app.runtime)
    bounds += [critical_path_bound(r["parents"], r["trace"], excl) if r.get("ok") else 0.0 for r in iso]
    bar.update()
    for rate in s.rates:
        n, lam = s.n_queries[rate], RATES[name][rate]
        arrivals = poisson_arrivals(n, lam, seed)
        for system in systems:
            bar.set_postfix_str(f"{name} trial {k} {rate} {system}")
            t_trace = time.perf_counter()
            if system == LLAMAINDEX:
                recs = await run_llamaindex_trace(app, rag, queries[:n], arrivals, offset)
            else:
                recs = await run_trace(app, queries[:n], arrivals, *SYSTEMS[system], extra, offset)
            for r in recs:
                r["trial"] = k
            entry = runs.setdefault(rate, {}).setdefault(system, {"rate": lam, "records": [], "trials": []})
            entry["records"] += recs
            entry["trials"].append(
                {
                    "seed": seed,
                    "arrivals": arrivals,
                    "seconds": time.perf_counter() - t_trace,
                    "loadavg_after": os.getloadavg(),
                }
            )
            bar.update()
    return queries, iso


def _pool_runs(runs: dict[str, Any], bounds: list[float]) -> None:
    """Every system's summaries at every rate; for teola also its mean Fig. 11 shares and whether decode
    pipelining released split items early."""
    for systems_at_rate in runs.values():
        for system, entry in systems_at_rate.items():
            _pool(entry, bounds)
            if system == "teola":
                shares = [c for c in map(critical_path_shares, entry["records"]) if c]
                entry["critical_path"] = (
                    {key: statistics.fmean(c[key] for c in shares) for key in shares[0]} if shares else None
                )
                entry["pipelined_items"] = pipelined_items(entry["records"])


async def _ablations(
    app: Any,
    name: str,
    s: Settings,
    trial0: dict[str, Any],
    res: dict[str, Any],
    bounds: list[float],
    t_start: float,
    bar: Any,
) -> None:
    """The ablation variants on trial 0's queries: alone, then (unless the time budget is used up by then)
    under the high rate against teola's trial-0 records at that rate. The time budget counts from
    `t_start`."""
    extra = {"nodes": s.nodes} if s.nodes else {}
    queries, iso = trial0["queries"], trial0["iso"]
    abl = res["ablations"]
    abl["single"] = {"teola": summarize(iso[: s.ablation_single], bounds)}
    for variant in s.ablations:
        bar.set_postfix_str(f"{name} ablation {variant} alone")
        recs = await run_alone(app, queries[: s.ablation_single], *ABLATIONS[variant], extra)
        abl["single"][variant] = {**summarize(recs, bounds), "records": recs}
        bar.update()
    over = time.perf_counter() - t_start > s.budget_s
    if over:
        abl["load_skipped"] = f"time budget of {s.budget_s:.0f} s used up before the ablations under load"
        bar.update(len(s.ablations))
    if s.ablation_load and "high" in s.rates and not over:
        n, lam = s.n_queries["high"], RATES[name]["high"]
        arrivals = poisson_arrivals(n, lam, s.seed)
        teola0 = [r for r in res["runs"]["high"]["teola"]["records"] if r["trial"] == 0]
        abl["load"] = {"rate": lam, "teola": summarize(teola0, bounds)}
        for variant in s.ablations:
            bar.set_postfix_str(f"{name} ablation {variant} high")
            recs = await run_trace(app, queries[:n], arrivals, *ABLATIONS[variant], extra)
            abl["load"][variant] = {**summarize(recs, bounds), "records": recs}
            bar.update()
