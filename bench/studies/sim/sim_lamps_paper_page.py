"""The page of the SIMULATED LAMPS paper study (bench/studies/sim/sim_lamps_paper.py): the paper's changes in
mean latency beside the simulated ones, every point and its load, the mechanism at the largest gap,
the sweep, and the drawn workload against the paper's Table 2."""

from __future__ import annotations

import math
from typing import Any

from bench.lib.tables import NONE, num, pct, table
from bench.studies.sim.sim_lamps_load import OVERLOAD
from bench.studies.sim.sim_lamps_report import latency_table, load_table

DATASET = {
    "single": "single-API (INFERCEPT subset)",
    "infercept": "multi-API (INFERCEPT)",
    "toolbench": "ToolBench",
}
# LAMPS §6.2, GPT-J 6B: change in mean end-to-end latency, LAMPS against the system, at (dataset, rate)
PAPER = {
    ("single", 3.0): {"INFERCEPT": +0.78, "vLLM": -14.48},
    ("single", 5.0): {"INFERCEPT": -65.51, "vLLM": -90.44},
    ("infercept", 3.0): {"INFERCEPT": -63.32},
    ("toolbench", 3.0): {"INFERCEPT": -27.24, "vLLM": -96.07},
}


def change(a: dict[str, Any], b: dict[str, Any]) -> float:
    """a's change in mean E2E against b, percent (nan when either finished nothing)."""
    if not a["measured"] or not b["measured"]:
        return math.nan
    return 100 * (a["mean_s"] / b["mean_s"] - 1)


def _mean(r: dict[str, Any]) -> str:
    return num(r["mean_s"]) if r["measured"] else NONE


def _arrived(r: dict[str, Any]) -> int:
    return r["measured"] + r["unfinished"]


def paper_table(data: dict[str, Any]) -> list[str]:
    rows = []
    for (mix, rate), against in PAPER.items():
        at = {r["system"]: r for r in data["mixes"].get(mix, []) if r["rate"] == rate}
        for other, paper in against.items():
            lamps, base = at.get("LAMPS"), at.get(other)
            if lamps is None or base is None:
                rows.append([DATASET[mix], f"{rate:g}", other, f"{paper:+.1f}%", "not run", "", "", ""])
                continue
            rows.append(
                [
                    DATASET[mix],
                    f"{rate:g}",
                    other,
                    f"{paper:+.1f}%",
                    f"{change(lamps, base):+.1f}%",
                    f"{_mean(lamps)} / {_mean(base)}",
                    f"{lamps['measured']}/{_arrived(lamps)} / {base['measured']}/{_arrived(base)}",
                    f"{'yes' if lamps['steady'] else 'no'} / {'yes' if base['steady'] else 'no'}",
                ]
            )
    return table(
        [
            "dataset",
            "rate (req/s)",
            "vs",
            "paper (GPT-J 6B, A100)",
            "SIMULATED, same set-up",
            "SIMULATED means (s): LAMPS / baseline",
            "finished (of arrived): LAMPS / baseline",
            "steady: LAMPS / baseline",
        ],
        rows,
        "lrlrrlll",
    )


def mechanism_table(rows: list[dict[str, Any]], cap: int) -> list[str]:
    cells = []
    for r in rows:
        ld, h = r["load"], r["handlings"]
        parts = f"{r['api_s']:.1f} / {r['queue_s']:.1f} / {r['engine_s']:.1f}" if r["measured"] else NONE
        cells.append(
            [
                r["system"],
                _mean(r),
                parts,
                f"{ld['waiting']:.0f}; {ld['waiting_last']:.0f}",
                num(ld["running"]),
                f"{pct(ld['kv_used'])} / {pct(ld['kv_max'])}; {pct(ld['kv_preserved'])}",
                num(ld["preserved"]),
                f"{h['preserve']} / {h['discard']} / {h['swap']}",
                pct(ld["swap_share"], 1),
                f"{r['measured']} / {r['unfinished']}",
            ]
        )
    return table(
        [
            "system",
            "mean E2E (s)",
            "API / queueing / in engine (s per request)",
            "calls waiting (mean; last fifth)",
            f"calls running (of {cap})",
            "KV in use (mean / max; held by paused calls)",
            "paused calls holding KV",
            "handlings preserve / discard / swap",
            "swap stalls (share of time)",
            "finished / unfinished",
        ],
        cells,
        "lrllrlrlrl",
    )


def distribution_table(dist: dict[str, Any]) -> list[str]:
    rows = [
        [
            DATASET[mix],
            kind,
            f"({d['paper_duration'][0]:.3g}, {d['paper_duration'][1]:.3g}) / "
            f"({d['duration'][0]:.3g}, {d['duration'][1]:.3g})",
            f"({d['paper_calls'][0]:.3g}, {d['paper_calls'][1]:.3g}) / ({d['calls'][0]:.2f}, "
            f"{d['calls'][1]:.2f})",
        ]
        for mix, kinds in dist.items()
        for kind, d in kinds.items()
        if not kind.startswith("_")
    ]
    return table(
        [
            "dataset",
            "API type",
            "duration mean, std (s): Table 2 / drawn",
            "calls per request mean, std: Table 2 / drawn",
        ],
        rows,
    )


def sweep_table(rows: list[dict[str, Any]]) -> list[str]:
    cells = []
    for variant in dict.fromkeys(r["variant"] for r in rows):
        at = {r["system"]: r for r in rows if r["variant"] == variant}
        a, b = at.get("INFERCEPT"), at.get("LAMPS")
        if a is None or b is None:
            continue
        cells.append(
            [
                variant,
                _mean(a),
                _mean(b),
                f"{change(b, a):+.1f}%",
                f"{pct(a['load']['kv_used'])} / {pct(b['load']['kv_used'])}",
                f"{a['load']['waiting']:.0f} / {b['load']['waiting']:.0f}",
                f"{a['measured']} / {b['measured']}",
            ]
        )
    return table(
        [
            "variant",
            "INFERCEPT mean E2E (s)",
            "LAMPS mean E2E (s)",
            "LAMPS vs INFERCEPT",
            "KV in use INFERCEPT / LAMPS",
            "calls waiting INFERCEPT / LAMPS",
            "finished INFERCEPT / LAMPS",
        ],
        cells,
        "lrrrlll",
    )


def markdown(data: dict[str, Any]) -> str:
    cap = data["setup"]["cap"]
    lines = [
        "## SIMULATED: LAMPS' end-to-end experiment at its set-up (GPT-J 6B, A100 40 GB) against INFERCEPT "
        "and vLLM",
        "",
        (
            f"Command: `{data['command']}` ({data['wall_s'] / 60:.1f} min). **Every number here but the "
            f"paper's is SIMULATED** on `{data['profile']}` (Llama-2-7B's measured A100 operators scaled to "
            f"GPT-J's shape: derived; KV pool {data['setup']['kv_blocks']} blocks: assumed); one instance, "
            f"up to {cap} sequences, admission by free KV blocks, no prefix cache (vLLM 0.2); request "
            f"lengths x{data['setup']['length_scale']:g} of bench/studies/sim/sim_lamps.py's assumed ones. "
            f"Poisson arrivals for {data['duration']:g} s from an empty system; the mean is over the "
            f"requests that finished by the end (+ {data['drain']:g} s). Set-up, datasets and what is "
            "assumed: bench/studies/sim/sim_lamps_paper.py's docstring."
        ),
        "",
    ]
    lines += (
        ["### Paper vs simulated: LAMPS' change in mean end-to-end latency", ""] + paper_table(data) + [""]
    )
    lines += ["### Every point", ""] + latency_table({**data, "warmup": 0.0}, OVERLOAD) + [""]
    lines += ["Load over the run (sampled every simulated second):", ""] + load_table(data, cap) + [""]
    if data.get("mechanism"):
        mix, rate = data["mechanism"]["mix"], data["mechanism"]["rate"]
        rows = [r for r in data["mixes"].get(mix, []) if r["rate"] == rate]
        lines += [f"### Mechanism at {DATASET[mix]}, {rate:g} req/s (the paper's largest gap)", ""]
        lines += mechanism_table(rows, cap) + [""]
    if data.get("sweep"):
        lines += [
            "### What the gain follows: INFERCEPT vs LAMPS at the same point with one property changed",
            "",
        ]
        lines += sweep_table(data["sweep"]) + [""]
    lines += ["### The drawn workload against the paper's Table 2", ""] + distribution_table(
        data["distributions"]
    )
    lengths = {m: d["_lengths"] for m, d in data["distributions"].items()}
    lines += [
        "",
        "Tokens written per segment (mean, std; assumed lognormal, not the datasets'): "
        + "; ".join(
            f"{DATASET[m]} ({v['segment_tokens'][0]:.0f}, {v['segment_tokens'][1]:.0f}), prompt words "
            f"({v['prompt_words'][0]:.0f}, {v['prompt_words'][1]:.0f})"
            for m, v in lengths.items()
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"
