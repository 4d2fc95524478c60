"""The page of bench/studies/sim/sim_steady.py: SIMULATED steady-state curves, throughput at equal
latency across the knee, the targets, and the mechanism at every point (queues, running batch, KV,
preemptions), with the simulator's measured error."""

from __future__ import annotations

import math
import re
from typing import Any

from bench.lib.results import results_dir
from bench.lib.tables import table

TITLE = {
    "autellix": "SIMULATED: Autellix Fig. 12 set-up at steady state (vLLM-opt vs MLFQ vs PLAS/ATLAS)",
    "lamps": "SIMULATED: LAMPS' set-up at steady state (INFERCEPT vs SJF vs LAMPS)",
}
GOAL = {
    "autellix": "Autellix: PLAS/ATLAS >= 2x vLLM-opt's throughput at equal latency on ShareGPT, BFCL, LATS; "
    ">= 4x on Mixed; MLFQ against FCFS (vLLM-opt)",
    "lamps": "LAMPS: within 25% of the paper's improvement over INFERCEPT (-27% to -65% mean E2E); a gain "
    "over SJF",
}


def fidelity() -> str:
    """The simulator's measured error, read from bench/results/sim/sim_fidelity_probe.md."""
    path = results_dir("sim") / "sim_fidelity_probe.md"
    text = path.read_text() if path.exists() else ""
    m = re.search(r"Mean absolute error (\d+)%, (\d+) of (\d+) points within (\d+)%", text)
    if not m:
        return "The simulator's measured error: see [sim_fidelity_probe](sim_fidelity_probe.md)."
    return (
        "The simulator's measured error ([sim_fidelity_probe](sim_fidelity_probe.md), CPU engines): mean "
        f"absolute error {m.group(1)}% of mean latency, {m.group(2)} of {m.group(3)} points within "
        f"{m.group(4)}%."
    )


def _v(x: Any, fmt: str = "{:.3g}") -> str:
    if x is None:
        return "none"
    x = float(x)
    return "overloaded" if math.isinf(x) else ("n/a" if math.isnan(x) else fmt.format(x))


def _mean(r: dict[str, Any]) -> str:
    """The mean latency; for a point with unfinished measured programs, the finished ones' mean beside it."""
    if r["unfinished"] and "finished_mean" in r:
        return f"overloaded ({_v(r['finished_mean'], '{:.4g}')} over the finished)"
    return _v(r["mean"], "{:.4g}")


def _stretch(r: dict[str, Any]) -> str:
    """Finished measured programs' latency over their own unloaded latency, and where a point stopped."""
    text = f"{_v(r.get('stretch_mean'), '{:.2f}')} / {_v(r.get('stretch_max'), '{:.1f}')}"
    if r.get("overloaded_at") is not None:
        text += f"; stopped at {r['overloaded_at']:.0f} s: a program overdue"
    return text


def points_table(w: dict[str, Any], field: str) -> list[str]:
    rows = []
    for r in sorted(w["rows"], key=lambda r: (r["load"], r["system"])):
        m = r.get("mechanism", {})
        if "teola_queue_mean" in m:
            mech = [
                f"{m['teola_queue_mean']:.1f} / {m['engine_waiting_mean']:.1f}",
                f"{m['running_mean']:.1f}",
                f"{100 * m['kv_mean']:.0f}% ({100 * m.get('kv_full', math.nan):.0f}%) / "
                + _v(100 * m.get("teola_held_mean", math.nan), "{:.0f}%"),
                f"{m['preemptions']} / {m['kv_preemptions']}",
                f"{r['in_system_first']:.1f} / {r['in_system_last']:.1f}",
                _stretch(r),
            ]
        else:
            h = r.get("handlings", {})
            mech = [
                f"{m.get('waiting', math.nan):.1f} / {m.get('engine_waiting', math.nan):.1f}",
                f"{m.get('running', math.nan):.1f}",
                f"{100 * m.get('kv_used', math.nan):.0f}%",
                f"{r.get('preemptions', 0)}; preserve/discard/swap "
                f"{h.get('preserve', 0)}/{h.get('discard', 0)}/{h.get('swap', 0)}",
                f"{m.get('waiting_first', math.nan):.1f} / {m.get('waiting_last', math.nan):.1f}",
                "n/a",
            ]
        rows.append(
            [
                f"{r['load']:g}",
                f"{r['rate']:.3g}",
                f"SIMULATED {r['system']}",
                str(r["measured"]),
                str(r["unfinished"]),
                _v(r[field], "{:.4g}"),
                _mean(r),
                "yes" if r["steady"] else "no",
            ]
            + mech
            + [f"{r['sim_wall_s']:.0f}"]
        )
    unit = "token latency (s/token)" if field == "tok_mean" else "mean E2E (s)"
    return table(
        [
            "load",
            "rate (/s)",
            "system",
            "measured",
            "unfinished",
            unit,
            "mean latency (s)",
            "steady",
            "waiting: teola / engine",
            "running",
            "KV: engine's use (time >= 95%) / teola's count",
            "preemptions: teola / engine",
            "in system / waiting: first / last third",
            "latency / own unloaded: mean / max",
            "wall (s)",
        ],
        rows,
    )


def levels_table(w: dict[str, Any]) -> list[str]:
    """Per point of a program policy: each queue's start (the program's service where it begins, in
    seconds, as the policy's observed quanta set it), its calls on average over the window (of them
    running: admitted to the engine), and their own mean service since they arrived or were promoted."""
    rows = [
        r
        for r in sorted(w["rows"], key=lambda r: (r["load"], r["system"]))
        if r.get("mechanism", {}).get("levels")
    ]
    if not rows:
        return []
    width = max(max(map(int, r["mechanism"]["levels"])) + 1 for r in rows)
    cells = []
    for r in rows:
        lv = r["mechanism"]["levels"]
        cells.append(
            [f"{r['load']:g}", f"SIMULATED {r['system']}"]
            + [
                f"from {_v(lv[str(i)]['from'])} s: {lv[str(i)]['calls']:.1f} ({lv[str(i)]['running']:.1f}); "
                f"{lv[str(i)]['service']:.2f} s"
                if str(i) in lv
                else "none"
                for i in range(width)
            ]
        )
    return (
        [
            "Service per level (each queue: where it starts; calls in it on average (of them running); their "
            "mean service):",
            "",
        ]
        + table(["load", "system"] + [f"Q{i}" for i in range(width)], cells)
        + [""]
    )


def reading_table(w: dict[str, Any], systems: list[str], base: str) -> list[str]:
    rows = []
    for f, rd in w["equal_latency"].items():
        cells = [f"{float(f):g}x ({rd['target']:.3g})"]
        for s in systems:
            x = rd.get(s, {})
            rate = _v(x.get("rate")) + (" (>=)" if x.get("lower_bound") else "")
            cells.append(
                f"{rate}; {x.get('ratio_note', '')}{_v(x.get('ratio'), '{:.2f}x')}" if s != base else rate
            )
        rows.append(cells)
    return table(["target: x baseline unloaded"] + [f"SIMULATED {s}: rate; vs {base}" for s in systems], rows)


def markdown(data: dict[str, Any]) -> str:
    study, field, base = data["study"], data["key"], data["base"]
    lines = [
        f"## {TITLE[study]}",
        "",
        f"Command: `{data['command']}` ({data.get('wall_s', 0) / 60:.1f} min, nice {data.get('nice', 0)}; 2 "
        "shared cores, other runs on the machine). **Every number here is SIMULATED** (teola's runtime on "
        "the simulated vLLM in virtual time); set-ups: bench/studies/sim/sim_autellix.py (S10) and "
        "bench/studies/sim/sim_lamps_paper.py (S9), rules: bench/studies/sim/steady_state.py. " + fidelity(),
        "",
        "Rules: arrivals over warm-up + window + cool-down = 3 + 10 + 2 x the baseline's unloaded mean "
        "latency (S9: at least 300 + 1800 + 300 s; S10: the warm-up at least 5 x the time the number of "
        "programs in the system takes to reach 95% of its settled value at the programs' own unloaded "
        "latencies); a measured program unfinished 20 x max(its own unloaded latency, the workload's mean "
        "own unloaded latency) after its arrival makes the point overloaded (S10; S9: 1000 calls waiting); "
        "only arrivals in the window are measured; steady = programs (S10) / waiting calls (S9) in the "
        "system do not keep growing over the window; each system climbs the load grid until its mean "
        f"latency passes {data['knee']:g}x the baseline's unloaded mean; throughput at equal latency is "
        "where a curve first crosses the target, linear in rate between swept points (an overloaded point: "
        "above every target, the crossing read as a lower bound).",
        "",
        f"Targets ({GOAL[study]}).",
        "",
    ]
    for k, w in data["workloads"].items():
        un, tr = w["unloaded"], w["trace"]
        st = w.get("settle")
        settle = (
            f" Programs' own unloaded latencies (alone on the engine, {st['programs']} programs): mean "
            f"{st['mean']:.3g} s, p95 {st['p95']:.3g} s, max {st['max']:.3g} s; 95% settled after "
            f"{st['cover']:.3g} s, so the warm-up is at least {data['knee']:g} x that."
            if st
            else ""
        )
        lines += [
            f"### {k} (SIMULATED)",
            "",
            f"Baseline {base} unloaded (rate {un['rate']:.3g}/s): mean latency {float(un['mean']):.3g} s, "
            f"{field} {float(un[field]):.3g}; trace: warm-up {tr[0]:.0f} s, window {tr[1]:.0f} s, cool-down "
            f"{tr[2]:.0f} s of arrivals; capacity scale {w['capacity']:.3g}/s." + settle,
            "",
            "Throughput at equal latency (rate each system sustains under the target):",
            "",
        ]
        lines += reading_table(w, data["systems"], base) + [
            "",
            "Every point (mechanism over the window):",
            "",
        ]
        lines += points_table(w, field) + [""] + levels_table(w)
    if data.get("cached_only"):
        lines += [
            "PARTIAL: written with --cached-only from the points finished so far; a system's sweep that "
            "stops below the knee was still running (its crossing, if any, is read as a lower bound).",
            "",
        ]
    if data.get("quick"):
        lines += ["Quick mode: a smoke run (two loads, a short trace), not a result."]
    return "\n".join(lines) + "\n"
