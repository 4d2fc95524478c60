"""vLLM engine steps under load against the simulator's iteration cost (`python -m bench sim_trace_diff
--rate`).

The real LLM logs every engine step (engines/vllm/step_stats.py: when the front end handled it,
tokens generated, prompt tokens computed, requests still running). Between two consecutive steps
with requests running, the engine was busy, so the gap is that step's time as the front end saw it.
Each such step is set against the cost model's seconds for its work, and grouped by whether it
prefilled and whether the embedder or the reranker was computing at the time (from the queries'
traces), which separates a cost model that is off from engines slowing each other.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from bench.lib.tables import num, table
from engines.sim.cost import IterationCost

OTHER_ENGINES = ("embedding", "reranker")


def busy_intervals(
    runs: Sequence[dict[str, Any]], arrivals: Sequence[float], engines: Sequence[str] = OTHER_ENGINES
) -> list[tuple[float, float]]:
    """[start, end] seconds from the trace's start of every primitive the named engines ran (each
    query's trace times count from its arrival)."""
    out = []
    for run, at in zip(runs, arrivals):
        for t in run["trace"]:
            if t.get("engine") in engines and t.get("started") is not None and t.get("finished") is not None:
                out.append((at + t["started"], at + t["finished"]))
    return sorted(out)


def step_rows(
    log: Sequence[Sequence[float]],
    cost: dict[str, float],
    busy: Sequence[tuple[float, float]],
    context_per_seq: float,
) -> list[dict[str, Any]]:
    """One row per timed step: log entries are (seconds from the trace's start, generated tokens,
    prompt tokens computed, requests running after the step). A step is timed when the step before
    it left requests running. Its model time: the iteration cost of its prompt tokens (attending to
    themselves) and its decoding sequences (generated tokens, less one first token when it
    prefilled), each with `context_per_seq` tokens of context."""
    model = IterationCost(**cost)
    rows = []
    for (t0, _, _, running), (t1, generated, prompt, _) in zip(log, log[1:]):
        if running <= 0 or t1 <= t0:
            continue
        decode = max(0, int(generated) - (1 if prompt else 0))
        predicted = model.seconds(int(prompt), decode, decode * context_per_seq, prompt * prompt / 2)
        other = any(s < t1 and e > t0 for s, e in busy)
        rows.append(
            {
                "measured": t1 - t0,
                "predicted": predicted,
                "prefill": bool(prompt),
                "other_busy": other,
                "decode": decode,
                "prompt": int(prompt),
            }
        )
    return rows


def summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (prefilled or not, other engines busy or not): steps, median measured and model seconds,
    the median of measured / model, and the totals."""
    out = []
    for prefill in (False, True):
        for other in (False, True):
            group = [r for r in rows if r["prefill"] == prefill and r["other_busy"] == other]
            if not group:
                continue
            out.append(
                {
                    "prefill": prefill,
                    "other_busy": other,
                    "steps": len(group),
                    "measured_s": statistics.median(r["measured"] for r in group),
                    "predicted_s": statistics.median(r["predicted"] for r in group),
                    "ratio": statistics.median(
                        r["measured"] / r["predicted"] for r in group if r["predicted"] > 0
                    ),
                    "measured_total_s": sum(r["measured"] for r in group),
                    "predicted_total_s": sum(r["predicted"] for r in group),
                }
            )
    return out


def markdown(per_app: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = [
        "Engine steps of the real LLM during the traces against the profile's iteration cost "
        "(bench/studies/sim/step_timing.py: a step is timed when the step before it left requests running; "
        "its model seconds count its prompt tokens and decoding sequences):",
        "",
    ]
    rows = [
        [
            app,
            "prefill" if g["prefill"] else "only decode",
            "yes" if g["other_busy"] else "no",
            g["steps"],
            num(g["measured_s"] * 1e3, 0),
            num(g["predicted_s"] * 1e3, 0),
            num(g["ratio"], 2),
            f"{g['measured_total_s']:.1f} / {g['predicted_total_s']:.1f}",
        ]
        for app, groups in per_app.items()
        for g in groups
    ]
    return (
        lines
        + table(
            [
                "app",
                "steps that",
                "embedder or reranker computing",
                "steps",
                "measured median (ms)",
                "model median (ms)",
                "measured / model (median)",
                "measured / model (total s)",
            ],
            rows,
            "lllrrrrr",
        )
        + [""]
    )
