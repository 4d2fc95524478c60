"""The end-to-end RAG study's plots: latency per system, per-op execution, teola's critical-path shares
(Fig. 11) and the ablations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.studies.rag.rag_analysis import trial_means
from bench.studies.rag.rag_setup import RATES


def plots(data: dict[str, Any], prefix: Path) -> list[str]:
    """Write <prefix>_latency.png, _breakdown.png and, when the run has them, _critical_path.png and
    _ablation.png; returns the names written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    apps = list(data["apps"])
    rates = sorted({r for res in data["apps"].values() for r in res["runs"]}, key=["low", "high"].index)
    written = [_latency(plt, data, apps, rates, prefix), _breakdown(plt, data, apps, rates, prefix)]
    written += [
        w for w in (_critical_path(plt, data, apps, rates, prefix), _ablation(plt, data, prefix)) if w
    ]
    return written


def _save(plt: Any, fig: Any, prefix: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(prefix.with_name(prefix.name + f"_{name}.png"), dpi=110)
    plt.close(fig)
    return name


def _latency(plt: Any, data: dict[str, Any], apps: list[str], rates: list[str], prefix: Path) -> str:
    """Mean latency per system (bars: trial min-max) and p99, per app and rate."""
    fig, axes = plt.subplots(len(apps), len(rates), figsize=(5 * len(rates), 3.4 * len(apps)), squeeze=False)
    for i, app in enumerate(apps):
        for j, rate in enumerate(rates):
            ax = axes[i][j]
            systems = data["apps"][app]["runs"].get(rate, {})
            names = list(systems)
            means = [systems[n]["summary"].get("mean", 0) for n in names]
            p99 = [systems[n]["summary"].get("p99", 0) for n in names]
            trial = [[m for m in trial_means(systems[n]) if m] or [0.0] for n in names]
            spread = [
                [max(0.0, m - min(t)) for m, t in zip(means, trial)],
                [max(0.0, max(t) - m) for m, t in zip(means, trial)],
            ]
            ax.bar(
                range(len(names)),
                means,
                yerr=spread,
                capsize=3,
                color=["tab:red" if n == "teola" else "tab:gray" for n in names],
            )
            ax.scatter(range(len(names)), p99, marker="_", s=300, color="k", label="p99")
            ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
            ax.set_title(f"{app}, {rate} rate ({RATES[app][rate]} q/s); bars: trial min-max", fontsize=9)
            ax.set_ylabel("latency (s)")
            ax.legend(fontsize=7)
    return _save(plt, fig, prefix, "latency")


def _breakdown(plt: Any, data: dict[str, Any], apps: list[str], rates: list[str], prefix: Path) -> str:
    """Per app at the highest rate: each system's execution seconds per query stacked by op."""
    fig, axes = plt.subplots(1, len(apps), figsize=(6 * len(apps), 3.8), squeeze=False)
    for i, app in enumerate(apps):
        ax = axes[0][i]
        systems = data["apps"][app]["runs"][rates[-1]]
        names = list(systems)
        ops = sorted({op for e in systems.values() for op in e["summary"].get("by_op", {})})
        bottom = [0.0] * len(names)
        for op in ops:
            vals = [systems[n]["summary"].get("by_op", {}).get(op, {}).get("exec", 0) for n in names]
            if max(vals) <= 0:
                continue
            ax.bar(range(len(names)), vals, bottom=bottom, label=op)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("execution s per query (summed)")
        ax.set_title(f"{app}, {rates[-1]} rate: per-op execution", fontsize=9)
        ax.legend(fontsize=6)
    return _save(plt, fig, prefix, "breakdown")


def _critical_path(
    plt: Any, data: dict[str, Any], apps: list[str], rates: list[str], prefix: Path
) -> str | None:
    """teola's Fig. 11 shares per app and rate, stacked; None (nothing written) if no run has them."""
    rows = [
        (f"{app}\n{rate}", e["critical_path"])
        for app in apps
        for rate in rates
        if (e := data["apps"][app]["runs"].get(rate, {}).get("teola")) and e.get("critical_path")
    ]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 2, 3.5))
    bottom = [0.0] * len(rows)
    for key in ("compile", "queueing", "execution", "scheduling_comm"):
        vals = [c[key] for _, c in rows]
        ax.bar(range(len(rows)), vals, bottom=bottom, label=key)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(rows)), [r for r, _ in rows], fontsize=8)
    ax.set_ylabel("share of latency")
    ax.set_title("teola critical path breakdown (Fig. 11)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return _save(plt, fig, prefix, "critical_path")


def _ablation(plt: Any, data: dict[str, Any], prefix: Path) -> str | None:
    """The ablation variants' mean latency alone and under the high rate; None if the run has none."""
    abl = data["apps"].get(data["settings"]["ablation_app"], {}).get("ablations", {})
    if not abl:
        return None
    variants = ["teola", *data["settings"]["ablations"]]
    parts = [(k, abl[k]) for k in ("single", "load") if k in abl]
    fig, axes = plt.subplots(1, len(parts), figsize=(5 * len(parts), 3.4), squeeze=False)
    for j, (k, d) in enumerate(parts):
        ax = axes[0][j]
        ax.bar(
            range(len(variants)),
            [d.get(v, {}).get("mean", 0) for v in variants],
            color=["tab:red"] + ["tab:gray"] * (len(variants) - 1),
        )
        ax.set_xticks(range(len(variants)), variants, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel("mean latency (s)")
        ax.set_title(f"ablation, {'single query' if k == 'single' else 'high rate'}", fontsize=9)
    return _save(plt, fig, prefix, "ablation")
