"""PNG plots of simulations (`teola simulate --plot FILE`): latency against arrival rate, and where
a query's time goes per engine (queued vs running) at each rate. Needs matplotlib
(`pip install 'teola[bench]'`), imported only when a plot is asked for."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from teola.sim.run import SimReport


def plot_reports(reports: Sequence[SimReport], path: str | Path) -> Path:
    """Write the latency-vs-rate and per-engine breakdown plot of `reports` (one per rate) to `path`."""
    if not reports:
        raise ValueError("plot_reports needs at least one simulation report")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(f"plots need matplotlib ({exc}); pip install 'teola[bench]'") from exc
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"--plot writes a PNG; give a file name ending in .png, got {str(path)!r}")
    reports = sorted(reports, key=lambda r: r.rate)
    rates = [r.rate for r in reports]
    fig, (lat, brk) = plt.subplots(1, 2, figsize=(11, 4.2))
    for label, values in (
        ("mean", [r.summary()["mean_s"] for r in reports]),
        ("p50", [r.percentile(50) for r in reports]),
        ("p99", [r.percentile(99) for r in reports]),
    ):
        lat.plot(rates, values, marker="o", label=label)
    lat.set(xlabel="arrival rate (queries/s)", ylabel="latency (simulated s)", title="latency vs rate")
    lat.grid(alpha=0.3)
    lat.legend()
    _breakdown(brk, reports)
    first = reports[0]
    fig.suptitle(f"SIMULATED: app {first.app}, {first.provenance} profile {first.profile!r}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _breakdown(ax, reports: Sequence[SimReport]) -> None:
    """Stacked bars per rate: each engine's mean queued and running seconds per query."""
    engines = sorted({e for r in reports for e in r.breakdown})
    xs = range(len(reports))
    bottom = [0.0] * len(reports)
    for i, engine in enumerate(engines):
        for j, (part, alpha) in enumerate((("running", 1.0), ("queued", 0.35))):
            vals = [r.mean_breakdown().get(engine, (0.0, 0.0))[1 - j] for r in reports]
            ax.bar(xs, vals, bottom=bottom, color=f"C{i}", alpha=alpha, label=f"{engine} {part}")
            bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(list(xs), [f"{r.rate:g}" for r in reports])
    ax.set(
        xlabel="arrival rate (queries/s)",
        ylabel="seconds per query (summed over primitives)",
        title="per-engine time: running (solid) vs queued (light)",
    )
    ax.margins(y=0.1)
    ax.legend(fontsize=7, ncol=2, loc="upper left")
