"""PNG plots of bench/results/sim/sim_paper.json (SIMULATED): latency vs rate per app and system, and
throughput / p99 latency against LLM instances. `python -m bench sim_paper`
writes them next to its tables; `python -m bench sim_paper_plots [results/NAME.json]`
redraws them from a result file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.lib.results import results_dir


def plots(data: dict[str, Any], prefix: Path) -> list[Path]:
    """Write <prefix>_latency.png and <prefix>_scale_out.png; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    curves = data.get("curves") or {}
    if curves:
        fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 4), squeeze=False)
        for ax, (app, curve) in zip(axes[0], curves.items()):
            systems = sorted({r["system"] for r in curve["rows"]}, key=lambda s: (s != "teola", s))
            for system in systems:
                rows = sorted((r for r in curve["rows"] if r["system"] == system), key=lambda r: r["rate"])
                ax.plot(
                    [r["rate"] for r in rows],
                    [r["mean_s"] for r in rows],
                    marker="o",
                    label=system,
                    linewidth=2.5 if system == "teola" else 1.2,
                )
            ax.set(title=app, xlabel="arrival rate (queries/s)", ylabel="mean latency (simulated s)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(f"SIMULATED latency vs rate, profile {data.get('profile')!r}")
        fig.tight_layout()
        written.append(_save(fig, prefix, "latency"))
    scale = (data.get("scale_out") or {}).get("rows") or []
    if scale:
        fig, ax = plt.subplots(figsize=(6, 4))
        ks = [r["llm_instances"] for r in scale]
        ax.plot(ks, [r["throughput_qps"] for r in scale], marker="o", label="throughput (q/s)")
        ax.plot(ks, [r["offered_qps"] for r in scale], linestyle="--", label="offered (q/s)")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="LLM instances",
            ylabel="queries/s",
            title=f"SIMULATED scale-out, advanced RAG, profile {data.get('profile')!r}",
        )
        ax2 = ax.twinx()
        ax2.plot(ks, [r["p99_s"] for r in scale], color="C3", marker="s", label="p99 latency (s)")
        ax2.set_ylabel("p99 latency (simulated s)")
        ax.legend(loc="upper left", fontsize=8)
        ax2.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        written.append(_save(fig, prefix, "scale_out"))
    return written


def _save(fig: Any, prefix: Path, what: str) -> Path:
    import matplotlib.pyplot as plt

    path = prefix.with_name(f"{prefix.name}_{what}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench sim_paper_plots`."""
    p.add_argument(
        "source", nargs="?", default=None, help="a result file (default bench/results/sim/sim_paper.json)"
    )


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Redraw the plots of a sim_paper result file."""
    source = Path(args.source) if args.source else results_dir("sim") / "sim_paper.json"
    for path in plots(json.loads(source.read_text()), source.with_suffix("")):
        print(f"wrote {path}")
    return 0
