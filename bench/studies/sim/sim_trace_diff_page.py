"""The page of the simulator's trace comparison (bench/studies/sim/sim_trace_diff.py): per app and
primitive, the real run's timings beside the simulated and replayed ones, the gaps between primitives,
and the engines' step timings."""

from __future__ import annotations

import statistics
from typing import Any

from bench.lib.tables import num, table
from bench.studies.sim.step_timing import markdown as steps_markdown

NAMES = ("naive_rag", "advanced_rag")  # the apps compared


def _queued(t: dict[str, Any]) -> float:
    """When a primitive was queued (0.0 is a time, not a missing one)."""
    return t["started"] if t.get("queued") is None else t["queued"]


def per_primitive(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """primitive -> engine, mean seconds queued and running, and (LLM calls) mean prompt / output tokens."""
    acc: dict[str, dict[str, Any]] = {}
    for run in runs:
        for t in run["trace"]:
            if t.get("started") is None or t.get("finished") is None:
                continue
            a = acc.setdefault(
                t["primitive"],
                {"queued": [], "running": [], "engine": t.get("engine") or "-", "prompt": [], "output": []},
            )
            a["queued"].append(t["started"] - _queued(t))
            a["running"].append(t["finished"] - t["started"])
            if "num_prompt_tokens" in t:
                a["prompt"].append(t["num_prompt_tokens"] - t.get("num_cached_tokens", 0))
            if "num_output_tokens" in t:
                a["output"].append(t["num_output_tokens"])
    mean = lambda xs: statistics.fmean(xs) if xs else None
    return {
        k: {
            "engine": v["engine"],
            "queued": statistics.fmean(v["queued"]),
            "running": statistics.fmean(v["running"]),
            "prompt": mean(v["prompt"]),
            "output": mean(v["output"]),
        }
        for k, v in acc.items()
    }


def edges(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Mean seconds before the first primitive is queued and after the last one finishes."""
    before, after = [], []
    for run in runs:
        done = [t for t in run["trace"] if t.get("finished") is not None]
        if not done:
            continue
        before.append(min(_queued(t) for t in done))
        after.append(run["latency"] - max(t["finished"] for t in done))
    return {
        "before": statistics.fmean(before),
        "after": statistics.fmean(after),
        "latency": statistics.fmean(r["latency"] for r in runs),
    }


def _tokens(row: dict[str, Any]) -> str:
    if row["prompt"] is None:
        return "-"
    return f"{row['prompt']:.0f}/{row['output']:.0f}" if row["output"] is not None else f"{row['prompt']:.0f}"


def markdown(d: dict[str, Any]) -> str:
    title = (
        "## Simulator vs real engines, primitive by primitive"
        + (f", {d['rate']} q/s Poisson arrivals" if d.get("rate") else "")
        + " (issue 17)"
    )
    lines = [
        title,
        "",
        f"Command: `{d['command']}` ({d['wall_s'] / 60:.1f} min). {d['n']} queries per app, "
        + (
            f"Poisson arrivals at {d['rate']} q/s (seed 0), prefix cache emptied before the trace, "
            if d.get("rate")
            else "one at a time, prefix cache emptied before each, "
        )
        + f"{d.get('system', 'teola')}'s config. "
        + (
            f"The profile's prompt-token estimate is scaled by {d['token_scale']:.3f} so the simulated "
            "calls have as many prompt tokens as the real ones of these same queries. "
            if d.get("token_scale")
            else ""
        )
        + "Simulated twice: with output lengths sampled from the real run's (as "
        "bench.studies.sim.sim_fidelity does), and with each call's real output length replayed. Seconds are "
        "means per query; prompt tokens are the ones not served from the prefix cache.",
        "",
    ]
    for name in NAMES:
        for side, label in (("sim", " (sampled lengths)"), ("replay", " (replayed lengths)")):
            if side in d:
                lines += _app_table(name, label, d["real"][name], d[side][name])
    if d.get("step_summary"):
        lines += steps_markdown(d["step_summary"])
    return "\n".join(lines) + "\n"


def _app_table(name: str, label: str, real: list[dict[str, Any]], sim: list[dict[str, Any]]) -> list[str]:
    er, es = edges(real), edges(sim)
    lines = [
        f"**{name}**{label}: latency measured {er['latency']:.2f} s, simulated {es['latency']:.2f} s "
        f"({(es['latency'] - er['latency']) / er['latency']:+.0%}); before the first primitive "
        f"{er['before'] * 1e3:.0f} vs {es['before'] * 1e3:.0f} ms; after the last "
        f"{er['after'] * 1e3:.0f} vs {es['after'] * 1e3:.0f} ms.",
        "",
    ]
    pr, ps = per_primitive(real), per_primitive(sim)
    rows = []
    for prim, r in sorted(pr.items(), key=lambda kv: -kv[1]["running"]):
        s = ps.get(prim)
        if s is None:
            continue
        err = (s["running"] - r["running"]) / r["running"] if r["running"] > 0 else 0.0
        rows.append(
            [
                prim,
                r["engine"],
                f"{_tokens(r)} ; {_tokens(s)}",
                f"{r['queued']:.3f} / {s['queued']:.3f}",
                num(r["running"], 3),
                num(s["running"], 3),
                f"{err:+.0%}",
            ]
        )
    lines += table(
        [
            "primitive",
            "engine",
            "prompt / output tokens real ; sim",
            "queued real / sim (s)",
            "running real (s)",
            "running sim (s)",
            "error",
        ],
        rows,
        "lllrrrr",
    )
    return lines + [""]
