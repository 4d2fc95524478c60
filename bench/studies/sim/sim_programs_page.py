"""The page of the simulated program study (bench/studies/sim/sim_programs.py): the workloads as generated,
one sweep per workload, instance count and preemption mode, and throughput at equal latency per
baseline, metric and target."""

from __future__ import annotations

from typing import Any

from bench.lib.tables import line, num, rule, table
from bench.studies.sim.program_setup import BUDGET, MIXED, NOCACHE, POLICIES, SHAPES
from teola.sim.program_runs import FCFS_TEXT, rates_at_target

TARGETS = (
    1.5,
    3,
    5,
    10,
)  # latency targets for throughput at equal latency, x the baseline's lowest-load value
METRICS = {
    "mean": "mean program latency",
    "tok_mean": "mean token latency (Autellix's: a program's latency over the tokens it decoded)",
}


def markdown(data: dict[str, Any]) -> str:
    title = (
        ""
        if data.get("out", "sim_programs") == "sim_programs"
        else f", loads {', '.join(map(str, data['loads']))}"
    )
    if data.get("promotion", "preempt") != "preempt":
        title += f", anti-starvation promotion {data['promotion']!r}"
    lines = [
        f"## SIMULATED: program-level scheduling at Autellix's shapes{title} "
        "(bench/studies/sim/sim_programs.py)",
        "",
        f"**Simulated, not measured**, on the derived profile `{data['profile']}` (engines/profiles/). "
        f"Command: `{data['command']}` ({data['wall_s'] / 60:.1f} min wall). {data['programs']} programs per "
        f"point; admission budget {BUDGET} running calls per instance; rates are fractions of FCFS's "
        + (
            "capacity: decoded tokens/s while a burst kept the admission budget full, over a program's mean "
            "decoded tokens (bench.studies.sim.sim_programs.saturated_capacity). "
            if data.get("capacity") == "saturated"
            else "burst capacity (programs / makespan of a burst). "
        )
        + "Throughput at equal latency: the highest rate at which a policy's mean program latency stays "
        "within 1.5x FCFS's mean at the lowest load (linear interpolation between measured rates, no "
        "extrapolation).",
        "",
    ]
    if data.get("shapes"):
        lines += [
            "Workloads as generated (seed 1; per call: decode tokens and new user tokens, 0 meaning one "
            "shipped question):",
            "",
            *shapes_table(data["shapes"]),
            "",
        ]
    for key, res in data["sweeps"].items():
        lines += sweep_section(key, res)
    return "\n".join(lines) + "\n"


def sweep_section(key: str, res: dict[str, Any]) -> list[str]:
    """One sweep ("kind|instances|mode"): its table, FCFS's rate under the target and each policy's ratio
    to it, and throughput at equal latency (pages before the token-latency columns have no such table)."""
    kind, inst, mode = key.split("|")
    tok = "tok_mean" in res["rows"][0]  # pages before the token-latency columns lack them
    lines = [
        f"### {kind}, {inst} instance(s), preemption by {mode} (capacity {res['capacity']:.2f} programs/s)",
        "",
        *sweep_table(res["rows"], tok),
    ]
    t = res["rate_at_target"]
    base = res.get("baseline", "fifo")  # pages before commit 82110ed ran the fifo strawman
    f = t.get(base)
    top = max(r["rate"] for r in res["rows"])
    bound = lambda p: ">= " if t[p] >= top - 1e-9 else ""  # under the target at the highest rate swept
    ratios = ", ".join(f"{p} {bound(p)}{t[p] / f:.2f}x" if (t[p] and f) else f"{p} n/a" for p in POLICIES)
    bounded = any(bound(p) for p in POLICIES if t[p])
    lines += [
        "",
        f"FCFS here is {FCFS_TEXT[base]}.",
        "",
        f"Rate at mean latency <= {res['target_s']:.1f} s: FCFS {f if f is None else round(f, 3)} "
        f"programs/s; vs FCFS: {ratios}"
        + (" ('>=': still under the target at the highest rate swept, so a lower bound)" if bounded else "")
        + ".",
        "",
    ]
    if tok:
        lines += equal_latency_table(res, top)
    return lines


def shapes_table(shapes: dict[str, Any]) -> list[str]:
    """The workloads as generated: shape, calls per program, decode and new user tokens per call."""
    return table(
        ["workload", "shape", "calls per program (mean / max)", "decode / call", "new user tokens / call"],
        (
            [
                k,
                f"`{SHAPES[k]}`"
                if k in SHAPES
                else f"each program one of {', '.join(MIXED)}, drawn uniformly",
                f"{v['calls_mean']:.2f} / {v['calls_max']}",
                num(v["out_mean"], 0),
                num(v["user_mean"], 0),
            ]
            for k, v in shapes.items()
        ),
        "llrrr",
    )


def sweep_table(rows: list[dict[str, Any]], tok: bool) -> list[str]:
    """One sweep's rows; `tok`: with the token-latency and prefix-cache columns (pages before them lack
    them)."""
    extra = (
        ["token latency, mean / p99 (ms per decoded token)", "prompt tokens from the prefix cache"]
        if tok
        else []
    )
    return table(
        [
            "load",
            "rate",
            "policy",
            "mean (s)",
            "p50",
            "p95",
            "p99",
            *extra,
            "preemptions",
            "re-sent tokens (cached)",
        ],
        (
            [
                num(r["load"], 2),
                num(r["rate"], 3),
                r["policy"],
                *(num(r[k]) for k in ("mean", "p50", "p95", "p99")),
                *(
                    [
                        f"{1000 * r['tok_mean']:.0f} / {1000 * r['tok_p99']:.0f}",
                        f"{r['cached_tokens'] / max(1, r['prompt_tokens']):.1%}",
                    ]
                    if tok
                    else []
                ),
                r["preemptions"],
                f"{r['resumed_tokens']} ({r['resumed_cached_tokens']})",
            ]
            for r in rows
        ),
        "rrlrrrr" + "rr" * tok + "rr",
    )


def equal_latency_table(res: dict[str, Any], top: float) -> list[str]:
    """Throughput at equal latency against each baseline on each metric (METRICS) and at several
    targets (TARGETS x the baseline's value at the lowest load): the baseline's rate under the
    target and each policy's ratio to it (teola.sim.program_runs.rates_at_target on the page's rows)."""
    rows = res["rows"]
    first = res.get("baseline", "fcfs")
    bases = [b for b in (first, NOCACHE) if any(r["policy"] == b for r in rows)]
    cols = (first, *POLICIES) if NOCACHE in bases else POLICIES  # against NOCACHE, FCFS with the cache too
    lines = [
        "Throughput at equal latency, per baseline, metric and target (the target is a multiple of the "
        "baseline's value at the lowest load; '>=': still under the target at the highest rate swept, so a "
        "lower bound; 'n/a': over it at the lowest rate, or the baseline never reached it):",
        "",
        line(["baseline", "latency metric", "target", "baseline's rate (programs/s)", *cols]),
        rule("llrr" + "r" * len(cols)),
    ]
    for base in bases:
        label = "FCFS, no prefix cache (Autellix's vLLM)" if base == NOCACHE else f"FCFS (`{base}`)"
        for metric in METRICS:
            for factor in TARGETS:
                target, rates = rates_at_target(rows, (base, *cols), base, factor=factor, key=metric)
                f = rates.get(base)
                unit = f"{target:.1f} s" if metric == "mean" else f"{1000 * target:.0f} ms/token"
                capped = f is not None and f >= top - 1e-9  # the baseline never reached the target: no ratio
                cell = lambda p: (
                    "n/a"
                    if not (rates[p] and f) or capped
                    else (">= " if rates[p] >= top - 1e-9 else "") + f"{rates[p] / f:.2f}x"
                )
                rate = "n/a" if f is None else (">= " if capped else "") + f"{f:.3f}"
                lines.append(
                    line([label, METRICS[metric], f"{factor}x ({unit})", rate, *(cell(p) for p in cols)])
                )
    return lines + [""]
