"""What the remote-services study keeps of its runs (bench/studies/remote/remote_apps.py): each query's
work (LLM calls, prompt and decode tokens, searches, tool calls), and per system and rate the pooled and
per-trial summaries, vLLM's tokens per decode step and teola's critical-path shares."""

from __future__ import annotations

import statistics
from typing import Any

from bench.studies.rag.rag_analysis import critical_path_shares, summarize
from engines.requests import PrimOp


def work(rec: dict[str, Any]) -> dict[str, float]:
    """LLM calls, prompt tokens, decode tokens, search and tool calls of one query's trace."""
    calls: dict[str, dict[str, int]] = {}
    searches = tools = 0
    for t in rec.get("trace", []):
        op = t.get("op")
        if op in ("decoding", "partial_decoding") and t.get("status", "ok") == "ok":
            c = calls.setdefault(t["primitive"].split("[")[0], {"prompt": 0, "out": 0})
            c["prompt"] = max(c["prompt"], t.get("num_prompt_tokens", 0))
            c["out"] = max(c["out"], t.get("num_output_tokens", 0))
        elif op in ("searching", "tool") and t.get("status", "ok") == "ok" and t.get("batch_size"):
            # teola: one map primitive per item (pipelined), run only if it had an item (its engine
            # batch may hold other queries' requests); the baselines: one call of batch_size requests
            n = 1 if not t["primitive"].startswith("llamaindex.") else t["batch_size"]
            searches += n if op == PrimOp.SEARCHING else 0
            tools += n if op == PrimOp.TOOL else 0
    return {
        "llm_calls": len(calls),
        "prompt_tokens": sum(c["prompt"] for c in calls.values()),
        "decode_tokens": sum(c["out"] for c in calls.values()),
        "searches": searches,
        "tool_calls": tools,
    }


def mean_work(records: list[dict[str, Any]]) -> dict[str, float]:
    ok = [work(r) for r in records if r.get("ok")]
    return {k: statistics.fmean(w[k] for w in ok) for k in ok[0]} if ok else {}


def tokens_per_step(trials: list[dict[str, Any]]) -> float | None:
    """vLLM's generated tokens per decode step over the trials' traces (decode-batching efficiency)."""
    steps = sum(t.get("vllm_steps", {}).get("decode_steps", 0) for t in trials)
    return (
        sum(t["vllm_steps"].get("generated_tokens", 0) for t in trials if t.get("vllm_steps")) / steps
        if steps
        else None
    )


def summarize_runs(runs: dict[str, Any], bounds: list[float]) -> None:
    """Each system's entry at each rate gets its summary (latency with the critical-path bounds, mean
    work, tokens per decode step) and each trial's; teola's its mean critical-path shares."""
    for systems in runs.values():
        for system, entry in systems.items():
            entry["summary"] = {
                **summarize(entry["records"], bounds),
                "work": mean_work(entry["records"]),
                "tokens_per_decode_step": tokens_per_step(entry["trials"]),
            }
            for j, tr in enumerate(entry["trials"]):
                mine = [r for r in entry["records"] if r["trial"] == j]
                tr["summary"] = {key: v for key, v in summarize(mine, bounds).items() if key != "by_op"}
            if system == "teola":
                shares = [c for c in map(critical_path_shares, entry["records"]) if c]
                entry["critical_path"] = (
                    {key: statistics.fmean(c[key] for c in shares) for key in shares[0]} if shares else None
                )
