"""Markdown for bench.studies.sim.sim_paper's results (every figure labelled simulated)."""

from __future__ import annotations

from typing import Any

from bench.lib.tables import num, table


def _provenance(profile: str) -> str:
    if profile.endswith("-measured"):
        return "LLM built from operator timings measured on A100s elsewhere, other engines derived"
    return "derived from published GPU and model figures"


def _speedups(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for f in sorted({r["fraction"] for r in rows}):
        at = {r["system"]: r for r in rows if r["fraction"] == f}
        if "teola" not in at or len(at) < 2:
            continue
        best = min((r["mean_s"], s) for s, r in at.items() if s != "teola")
        out.append(
            f"{f:.2f}x: teola {at['teola']['mean_s']:.2f} s vs best baseline {best[1]} {best[0]:.2f} s "
            f"= {best[0] / at['teola']['mean_s']:.2f}x"
        )
    return out


DOCS_NOTE = {
    "small": "Documents: TruthfulQA questions over ten ~1-chunk passages (11-13 chunks per query).",
    "large": (
        "Documents: NarrativeQA questions over the gold story and 28 others (~100 chunks per query), "
        "and advanced RAG's reranker declared a cross-encoder as in the paper, so its expansion and expanded "
        "searches run."
    ),
}


def report(data: dict[str, Any]) -> str:
    docs = data.get("docs", "small")
    title = "" if docs == "small" else ", large documents"
    lines = [
        f"## SIMULATED: Teola Fig. 8-10 set-up on GPU profiles{title} (bench/studies/sim/sim_paper.py)",
        "",
        f"**Simulated, not measured.** Profile `{data['profile']}` ({_provenance(data['profile'])}; its file "
        "lists the source of every number; no output-length samples, so every LLM call decodes its "
        "max_tokens). The simulator's measured error on this machine: "
        f"bench/results/sim/sim_fidelity_probe.md. Command: `{data['command']}` ({data['wall_s']:.0f} s "
        f"wall). {data['queries']} queries per point; rates are fractions of each app's simulated teola "
        "capacity. " + DOCS_NOTE[docs],
        "",
    ]
    lines += curve_lines(data) + ablation_lines(data)
    so = data.get("scale_out")
    if not so:
        return "\n".join(lines) + "\n"
    return "\n".join(lines + scale_out_lines(so)) + "\n"


def curve_lines(data: dict[str, Any]) -> list[str]:
    """Per app: each load and system's latency and throughput, and teola's speedup per load."""
    lines: list[str] = []
    for app, curve in data["curves"].items():
        lines += [
            f"### {app} (simulated capacity {curve['capacity_qps']:.2f} q/s)",
            "",
            *table(
                ["load", "rate (q/s)", "system", "mean (s)", "p50 (s)", "p99 (s)", "throughput (q/s)"],
                (
                    [
                        num(r["fraction"], 2),
                        num(r["rate"], 2),
                        r["system"],
                        num(r["mean_s"], 2),
                        num(r["p50_s"], 2),
                        num(r["p99_s"], 2),
                        num(r["throughput_qps"], 2),
                    ]
                    for r in curve["rows"]
                ),
                "rrlrrrr",
            ),
        ]
        lines += [
            "",
            "Simulated teola speedup (best baseline's mean / teola's mean) per load: "
            + "; ".join(_speedups(curve["rows"]))
            + ".",
            "",
        ]
    return lines


def ablation_lines(data: dict[str, Any]) -> list[str]:
    """Advanced RAG with each variant of the passes (none if the run had no ablations)."""
    lines: list[str] = []
    if data.get("ablations"):
        ab = data["ablations"]
        lines += [
            "### Ablations, advanced RAG (simulated)",
            "",
            *table(
                ["load", "variant", "mean (s)", "p99 (s)"],
                ([r["load"], r["variant"], num(r["mean_s"], 2), num(r["p99_s"], 2)] for r in ab["rows"]),
                "llrr",
            ),
        ]
        lines.append("")
    return lines


def scale_out_lines(so: dict[str, Any]) -> list[str]:
    """Advanced RAG on 1, 2, ... LLM instances at 0.8x capacity each, and the plots."""
    lines = [
        f"### Scale-out, advanced RAG (simulated; 1-instance capacity {so['one_instance_capacity_qps']:.2f} "
        "q/s, offered 0.8x capacity per instance)",
        "",
        *table(
            [
                "LLM instances",
                "queries",
                "offered (q/s)",
                "throughput (q/s)",
                "mean (s)",
                "p99 (s)",
                "simulator wall (s)",
                "primitives/s of wall",
            ],
            (
                [
                    r["llm_instances"],
                    r["queries"],
                    num(r["offered_qps"]),
                    num(r["throughput_qps"]),
                    num(r["mean_s"], 2),
                    num(r["p99_s"], 2),
                    num(r["wall_s"]),
                    num(r["primitives_per_wall_s"], 0),
                ]
                for r in so["rows"]
            ),
            "r" * 8,
        ),
    ]
    lines += [
        "",
        "Plots (bench/studies/sim/sim_paper_plots.py): `bench/results/sim/sim_paper_latency.png` (latency vs "
        "rate per app and system), `bench/results/sim/sim_paper_scale_out.png`.",
    ]
    return lines
