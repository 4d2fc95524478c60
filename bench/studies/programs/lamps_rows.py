"""The per-rate rows of the two real-engine LAMPS studies (bench.studies.programs.lamps_real's requests,
bench.studies.programs.agent_real's ReAct agent): each system's mean latency over its trials, its tail,
its first-token or first-action times and LAMPS' change against it, then the study's own columns."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from bench.lib.tables import num


def lamps_delta(agg: dict[str, dict[str, Any]], system: str) -> str:
    """LAMPS' change in mean end-to-end latency against `system` at one rate ("" on LAMPS' own row and
    when LAMPS did not run at that rate)."""
    if system == "LAMPS" or "LAMPS" not in agg:
        return ""
    return f"{100 * (agg['LAMPS']['mean_s'] / agg[system]['mean_s'] - 1):+.0f}%"


def rate_rows(
    rows: list[dict[str, Any]],
    systems: Iterable[str],
    trials_mean: Callable[[list[dict[str, Any]]], dict[str, Any]],
    first: str,
    tail: Callable[[dict[str, Any]], list[Any]],
) -> list[list[Any]]:
    """Per rate and per system of `systems` that ran at it: rate, system, mean E2E s (each trial's mean),
    p99 E2E s, the mean and p99 of `first` (the `<first>_mean_s` / `<first>_p99_s` of `trials_mean`'s
    result), LAMPS' change against the system, then `tail` of that result."""
    cells = []
    for rate in sorted({r["rate"] for r in rows}):
        agg = {
            system: trials_mean(rs)
            for system in systems
            if (rs := [r for r in rows if r["rate"] == rate and r["system"] == system])
        }
        for system, a in agg.items():
            cells.append(
                [
                    f"{rate:g}",
                    system,
                    f"{a['mean_s']:.2f} ({a['trials']})",
                    num(a["p99_s"], 2),
                    num(a[f"{first}_mean_s"], 2),
                    num(a[f"{first}_p99_s"], 2),
                    lamps_delta(agg, system),
                    *tail(a),
                ]
            )
    return cells
