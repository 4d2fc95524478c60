"""Steady-state statistics and the results page of bench.studies.sim.sim_lamps (pure functions over its
records).

A point's requests arrive over warm-up + window + cool-down seconds; only those arriving inside the
window are measured (`in_window`). Its mean E2E gets a 95% interval from batch means (the window cut
into BATCHES equal spans by arrival: the spans are nearly independent at steady state, single
requests are not), and so does LAMPS' change against another system (the ratio of their batch means
on the same arrivals). `steady` says whether the point is at steady state: the calls waiting
(in teola's queue and the engine's) did not grow over the window by more than the engine holds
(CAP calls), and the mean E2E of the window's second half is within DRIFT of its first half's.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from bench.lib.tables import num, pct, table

BATCHES = 10
T_975_9 = 2.262  # Student t, 97.5th percentile, 9 degrees of freedom (BATCHES - 1)
DRIFT = 0.2


def in_window(done: list[dict[str, Any]], warmup: float, window: float) -> list[dict[str, Any]]:
    """The records of requests that arrived in [warmup, warmup + window)."""
    return [d for d in done if warmup <= d["arrival"] < warmup + window]


def batch_means(
    rows: list[dict[str, Any]], warmup: float, window: float, key: str = "latency", batches: int = BATCHES
) -> list[float]:
    """Mean of `key` per equal span of arrival time in the window (nan for an empty span)."""
    sums, counts = [0.0] * batches, [0] * batches
    for d in rows:
        b = min(batches - 1, int((d["arrival"] - warmup) / window * batches))
        sums[b] += d[key]
        counts[b] += 1
    return [s / c if c else math.nan for s, c in zip(sums, counts)]


def interval(values: list[float]) -> float:
    """Half-width of the 95% interval of the mean of BATCHES batch means (nan if any is missing)."""
    if len(values) != BATCHES or any(math.isnan(v) for v in values):
        return math.nan
    return T_975_9 * statistics.stdev(values) / math.sqrt(len(values))


def slope(samples: list[float], tick: float) -> float:
    """Least-squares growth per second of a series sampled every `tick` seconds (0 for < 2 samples)."""
    n = len(samples)
    if n < 2:
        return 0.0
    xs = [i * tick for i in range(n)]
    mx, my = statistics.fmean(xs), statistics.fmean(samples)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, samples)) / den


def steady(queued: list[float], tick: float, window: float, halves: tuple[float, float], cap: int) -> bool:
    """At steady state: waiting calls grew by less than `cap` over the window and the second half's
    mean E2E is within DRIFT of the first half's."""
    first, second = halves
    return slope(queued, tick) * window < cap and abs(second / first - 1) <= DRIFT


def summarize(done: list[dict[str, Any]], warmup: float, window: float) -> dict[str, Any]:
    """Latency statistics of the measured requests: mean, its interval, p99, means of the API,
    queueing and engine parts, the two halves' means, and the batch means."""
    rows = in_window(done, warmup, window)
    if not rows:  # an overloaded point, stopped before its requests finished
        nan = math.nan
        return {
            "measured": 0,
            "mean_s": nan,
            "ci_s": nan,
            "p99_s": nan,
            "api_s": nan,
            "queue_s": nan,
            "engine_s": nan,
            "halves": (nan, nan),
            "batch_means": [nan] * BATCHES,
            "handlings": {"preserve": 0, "discard": 0, "swap": 0},
        }
    lat = sorted(d["latency"] for d in rows)
    half = warmup + window / 2
    first = [d["latency"] for d in rows if d["arrival"] < half]
    second = [d["latency"] for d in rows if d["arrival"] >= half]
    means = batch_means(rows, warmup, window)
    return {
        "measured": len(rows),
        "mean_s": statistics.fmean(lat),
        "ci_s": interval(means),
        "p99_s": lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))],
        "api_s": statistics.fmean(d["api_s"] for d in rows),
        "queue_s": statistics.fmean(d["queue_s"] for d in rows),
        "engine_s": statistics.fmean(d["latency"] - d["api_s"] - d["queue_s"] for d in rows),
        "halves": (
            statistics.fmean(first) if first else math.nan,
            statistics.fmean(second) if second else math.nan,
        ),
        "batch_means": means,
        "handlings": {h: sum(d["handlings"].count(h) for d in rows) for h in ("preserve", "discard", "swap")},
    }


def change(lamps: dict[str, Any], other: dict[str, Any]) -> tuple[float, float]:
    """LAMPS' change in mean E2E against `other` (percent) and the 95% half-width of that change
    from the ratios of their batch means (same arrivals)."""
    diff = 100 * (lamps["mean_s"] / other["mean_s"] - 1)
    ratios = [a / b for a, b in zip(lamps["batch_means"], other["batch_means"])]
    return diff, 100 * interval(ratios)


def _pm(x: float) -> str:
    return "" if math.isnan(x) else f" ± {x:.0f}" if x >= 1 else f" ± {x:.1f}"


def latency_table(data: dict[str, Any], overload: int) -> list[str]:
    cells = []
    for mix, rows in data["mixes"].items():
        for rate in sorted({r["rate"] for r in rows}):
            at = {r["system"]: r for r in rows if r["rate"] == rate}
            lamps = at.get("LAMPS")
            for system, r in at.items():
                if not r["measured"]:
                    cells.append(
                        [
                            mix,
                            f"{rate:g}",
                            system,
                            0,
                            f"overloaded: over {overload} calls waiting "
                            f"{r['load']['overloaded_at'] - data['warmup']:.0f} s into the window",
                            "",
                            "",
                            "",
                            "",
                            "**no**",
                        ]
                    )
                    continue
                delta = ""
                if lamps is not None and lamps["measured"] and system != "LAMPS":
                    diff, hw = change(lamps, r)
                    delta = f"{diff:+.0f}%{_pm(hw)}"
                h = r["handlings"]
                cells.append(
                    [
                        mix,
                        f"{rate:g}",
                        system,
                        r["measured"],
                        f"{r['mean_s']:.1f}{_pm(r['ci_s'])}",
                        num(r["p99_s"], 0),
                        delta,
                        f"{r['api_s']:.1f} / {r['queue_s']:.1f} / {r['engine_s']:.1f}",
                        f"{h['preserve']} / {h['discard']} / {h['swap']}",
                        "yes" if r["steady"] else "**no**",
                    ]
                )
    return table(
        [
            "mix",
            "rate (req/s)",
            "system",
            "measured",
            "mean E2E (s)",
            "p99 E2E (s)",
            "LAMPS vs system (mean)",
            "API / queueing / in engine (s per request)",
            "handlings (preserve / discard / swap)",
            "steady",
        ],
        cells,
        "lrlrrrrlll",
    )


def load_table(data: dict[str, Any], cap: int) -> list[str]:
    cells = []
    for mix, rows in data["mixes"].items():
        for r in sorted(rows, key=lambda r: (r["rate"], r["system"])):
            ld = r["load"]
            cells.append(
                [
                    mix,
                    f"{r['rate']:g}",
                    r["system"],
                    num(ld["running"]),
                    f"{ld['waiting']:.0f} ({ld['waiting_first']:.0f} / {ld['waiting_last']:.0f}; "
                    f"{ld.get('engine_waiting', 0):.1f})",
                    num(ld["preserved"], 0),
                    f"{pct(ld['kv_used'])} / {pct(ld['kv_max'])}; {pct(ld.get('kv_preserved', 0))}",
                    pct(ld["swap_share"], 1),
                    f"{num(r['halves'][0])} / {num(r['halves'][1])}",
                ]
            )
    return table(
        [
            "mix",
            "rate (req/s)",
            "system",
            f"calls running (of {cap})",
            "calls waiting (mean; first / last fifth; in the engine)",
            "paused calls holding KV",
            "KV blocks in use (mean / max; held by paused calls)",
            "swap stalls (share of time)",
            "E2E 1st / 2nd half (s)",
        ],
        cells,
        "lrlrlrlrl",
    )


def admission(data: dict[str, Any], cap: int) -> str:
    """How calls were admitted into the engine in this run (the same for every system)."""
    setup = data.get("setup") or {}
    pool = f", a KV pool of {setup['kv_blocks']} blocks" if setup.get("kv_blocks") else ""
    told = (
        "; SJF and LAMPS are told each segment's length times a predicted/actual ratio drawn from the "
        f"held-out rows of {setup['predictions']} (a measured predictor's error)"
        if setup.get("predictions")
        else "; SJF and LAMPS are told the true lengths"
    )
    if setup.get("kv_admission"):
        return (
            "for every system admission bound by KV blocks (a call is sent only while the engine has free "
            f"KV for it: bench/studies/sim/kv_admission.py) and at most {cap} calls in the engine{pool}{told}"
        )
    return f"{cap} calls in the engine for every system{pool}{told}"


def markdown(data: dict[str, Any], cap: int, overload: int) -> str:
    sweep = data.get("sweep", False)
    title = (
        "## SIMULATED: load per arrival rate for bench.studies.sim.sim_lamps (rate sweep)"
        if sweep
        else "## SIMULATED: LAMPS vs FCFS + INFERCEPT vs SJF on API-augmented requests at steady state "
        "(issue 18)"
    )
    lines = [
        title,
        "",
        f"Command: `{data['command']}` ({data['wall_s'] / 60:.1f} min"
        + (f" at nice {data['nice']}" if data.get("nice") else "")
        + f"). **Simulated** on the `{data['profile']}` profile (docs/simulator.md: what in it is measured, "
        f"derived or assumed); one instance; {admission(data, cap)}. Poisson arrivals for {data['warmup']:g} "
        f"s of warm-up + {data['window']:g} s measured + {data['cooldown']:g} s of cool-down (simulated "
        "time); only requests arriving in the measured window count; ± is the 95% interval from 10 batch "
        "means (bench/studies/sim/sim_lamps_report.py). Workload and assumptions: "
        "bench/studies/sim/sim_lamps.py's docstring (INFERCEPT / ToolBench API mixes from LAMPS Table 2; "
        "segment lengths assumed). The simulator's error on this machine: "
        "bench/results/sim/sim_fidelity_probe.md.",
        "",
    ]
    if not sweep:
        lines += latency_table(data, overload) + [""]
    lines += ["Load over the measured window (sampled every simulated second):", ""] + load_table(data, cap)
    return "\n".join(lines) + "\n"


def reading(data: dict[str, Any]) -> str:
    """Per mix: LAMPS's change in mean latency where both systems are at steady state, each system's
    highest steady rate, and how much of a request is API time."""
    out = ["**Reading** (all simulated; target from the issue: LAMPS -40% or better vs FCFS + INFERCEPT)."]
    for mix, rows in data["mixes"].items():
        vs: dict[str, list[float]] = {s: [] for s in dict.fromkeys(r["system"] for r in rows) if s != "LAMPS"}
        for rate in sorted({r["rate"] for r in rows}):
            at = {r["system"]: r for r in rows if r["rate"] == rate}
            for other in vs:
                if "LAMPS" in at and other in at and at["LAMPS"]["steady"] and at[other]["steady"]:
                    vs[other].append(change(at["LAMPS"], at[other])[0])
        api = statistics.fmean(r["api_s"] for r in rows if r["measured"])
        span = {
            k: (f"{min(v):+.0f}% to {max(v):+.0f}%" if v else "no common steady point") for k, v in vs.items()
        }
        top = {
            s: max((r["rate"] for r in rows if r["system"] == s and r["steady"]), default=None)
            for s in dict.fromkeys(r["system"] for r in rows)
        }
        tops = ", ".join(f"{s} {'none' if t is None else f'{t:g} req/s'}" for s, t in top.items())
        versus = "; ".join(f"{v} vs {k}" for k, v in span.items())
        out.append(
            f"{mix}: where both are at steady state, LAMPS' change in mean latency: {versus}; highest steady "
            f"rate measured: {tops}; a request spends {api:.1f} s in its API calls on average, which no "
            "schedule shortens."
        )
    return " ".join(out)
