"""What the end-to-end RAG study computes from its records: the critical-path lower bound, the Fig. 11
shares along a query's actual critical path, per-op times, a system's summary, and teola's speedups over
the baselines with their verdicts."""

from __future__ import annotations

import statistics
from typing import Any

import teola.trace.timeline as timeline
from bench.lib.results import percentile
from engines.requests import PrimOp


def _exec(t: dict[str, Any]) -> float:
    """A primitive's own execution time; a prefill fused into its decode counts in the decode."""
    if t.get("fused_into") or t.get("status") not in (None, "ok"):
        return 0.0
    return max(0.0, (t.get("finished") or 0.0) - (t.get("started") or 0.0))


def critical_path_bound(
    parents: dict[str, list[str]],
    trace: list[dict[str, Any]],
    exclusive: tuple[str, ...] | list[str] | set[str] = (),
) -> float:
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
            after[n] = max(
                (_exec(by.get(c, {})) + longest_after(c) for c in children.get(n, [])), default=0.0
            )
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
    return (
        "bound: the query's e-graph weighted by its primitives' times alone, the longest path or, for each "
        f"engine that runs one batch at a time ({', '.join(exclusive)}), the time it spent on the query's "
        "batches plus the shortest path before and after them, whichever is larger"
    )


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
    return {
        "compile": rec["compile_s"] / total,
        "queueing": queue_s / total,
        "execution": exec_s / total,
        "scheduling_comm": other / total,
        "gap_on_path_s": times["gap"],
    }


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
    return {
        op: {"exec": union_seconds(runs[op]), "queue": union_seconds(waits.get(op, [])), "count": count[op]}
        for op in runs
    }


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
    out: dict[str, Any] = {
        "n": len(records),
        "failed": len(records) - len(ok),
        "errors": sorted({r["error"] for r in records if not r.get("ok")})[:3],
    }
    if lat:
        out.update(
            mean=statistics.fmean(lat),
            p50=percentile(lat, 50),
            p99=percentile(lat, 99),
            compile_mean=statistics.fmean(r["compile_s"] for r in ok),
        )
    if bounds:
        ratios = [r["latency"] / bounds[r["i"]] for r in ok if bounds[r["i"]] > 0]
        if ratios:
            out["bound_ratio_mean"] = statistics.fmean(ratios)
            out["bound_ratio_p50"] = percentile(ratios, 50)
    out["by_op"] = by_op_means([op_times(r["trace"]) for r in ok])
    out["decode_tokens_mean"] = statistics.fmean(decode_tokens(r["trace"]) for r in ok) if ok else 0.0
    out["cached_tokens_mean"] = (
        statistics.fmean(
            sum(t.get("num_cached_tokens", 0) for t in r["trace"] if not t.get("fused_with")) for r in ok
        )
        if ok
        else 0.0
    )
    return out


def pipelined_items(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether decode pipelining released split items early: spread of partial-decode finish times."""
    spreads = []
    for r in records:
        fin = [
            t["finished"]
            for t in r.get("trace", [])
            if t["op"] == PrimOp.PARTIAL_DECODING and t.get("finished")
        ]
        if len(fin) > 1:
            spreads.append(max(fin) - min(fin))
    return {"queries": len(spreads), "mean_spread_s": statistics.fmean(spreads) if spreads else None}


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
                rows.append(
                    {
                        "app": app,
                        "rate": rate,
                        "baseline": sysname,
                        "mean": statistics.fmean(ratios),
                        "min": min(ratios),
                        "max": max(ratios),
                        "std": statistics.stdev(ratios) if len(ratios) > 1 else 0.0,
                        "trials": ratios,
                        "p50": b["p50"] / t["p50"],
                        "p99": b["p99"] / t["p99"],
                    }
                )
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
