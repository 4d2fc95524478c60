"""Latency against offered load: one PNG beside a study page, `bench/results/<subject>/<name>_vs_load.png`,
drawn from the page's JSON. The study's own page writer calls `write_load_plot`, so the command that writes a
page also draws its plot; `python -m bench report --plots [NAME ...]` redraws them from the committed JSON
without rerunning anything.

Read shapes (per flow, per load point, per system):
- a pooled doc_qa trials page: `pooled.apps[flow].runs[point][system]` with `summary.mean`,
  `trials[k].summary.mean` and the trials' offered `rates`;
- a remote_apps page: `apps[flow].runs[point][system]` with `rate`, `summary.mean`, `trials[k].summary.mean`;
- one doc_qa run: `runs[flow][point]` with `rate` and `{system: {"mean": ...}}`;
- a programs_heavy page: `summary` rows with `rate`, `policy`, `mean` and `mean_range` over the trials;
- a lamps_real page: `rows`, one per trial, with `rate`, `system` and `mean_s` (the mean over trials drawn).
The plotted point is each system's mean latency; where a page has trials, the band is the min-max of the
trials' means. "alone" (queries one at a time) is drawn at 0 queries/s.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.lib.results import result_dirs

SUFFIX = "_vs_load.png"
DPI = 100


@dataclass(slots=True)
class Series:
    """One system's curve: offered load (per second), mean latency (s) and the trials' min-max of it."""

    system: str
    rate: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    low: list[float] = field(default_factory=list)
    high: list[float] = field(default_factory=list)

    def add(self, rate: float, mean: float, trial_means: list[float]) -> None:
        self.rate.append(rate)
        self.mean.append(mean)
        self.low.append(min(trial_means, default=mean))
        self.high.append(max(trial_means, default=mean))


Panels = dict[str, dict[str, Series]]  # flow -> system -> series
Row = list[tuple[str, float, float | None, list[float]]]  # (system, rate, mean, the trials' means) per system


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def _trial_mean(t: dict[str, Any]) -> float | None:
    return _num((t.get("summary") or t).get("mean"))


def _entries(flows: dict[str, Any], row_of: Callable[[dict[str, Any]], Row]) -> Panels:
    """flows: {flow: {point: row}}; row_of(row) -> [(system, rate, mean, trial means)]."""
    panels: Panels = {}
    for flow, points in flows.items():
        curves: dict[str, Series] = {}
        for row in points.values():
            for system, rate, mean, trials in row_of(row):
                if mean is not None:
                    curves.setdefault(system, Series(system)).add(rate or 0.0, mean, trials)
        for s in curves.values():  # by offered load
            order = sorted(range(len(s.rate)), key=s.rate.__getitem__)
            for name in ("rate", "mean", "low", "high"):
                values = getattr(s, name)
                setattr(s, name, [values[i] for i in order])
        if curves:
            panels[flow] = dict(sorted(curves.items(), key=lambda kv: (not kv[0].startswith("teola"), kv[0])))
    return panels


def _pooled_rows(row: dict[str, Any]) -> Row:
    out = []
    for system, e in row.items():
        if not isinstance(e, dict) or "summary" not in e:
            continue
        rates = [r for r in (_num(x) for x in e.get("rates") or [e.get("rate")]) if r is not None]
        trials = [
            m for m in (_trial_mean(t) for t in e.get("trials") or [] if isinstance(t, dict)) if m is not None
        ]
        out.append(
            (system, sum(rates) / len(rates) if rates else 0.0, _num(e["summary"].get("mean")), trials)
        )
    return out


def _run_rows(row: dict[str, Any]) -> Row:
    rate = _num(row.get("rate")) or 0.0
    return [
        (system, rate, _num(e.get("mean")), [])
        for system, e in row.items()
        if isinstance(e, dict) and "mean" in e
    ]


def series(data: dict[str, Any]) -> Panels:
    """The curves a page's JSON holds, per flow and system; empty when it has no load points."""
    if isinstance(data.get("pooled"), dict):
        flows = {f: v.get("runs", {}) for f, v in data["pooled"].get("apps", {}).items()}
        return _entries(flows, _pooled_rows)
    if isinstance(data.get("apps"), dict):
        flows = {f: v.get("runs", {}) for f, v in data["apps"].items() if isinstance(v, dict)}
        return _entries(flows, _pooled_rows)
    if isinstance(data.get("runs"), dict):
        return _entries(data["runs"], _run_rows)
    if isinstance(data.get("summary"), list):
        rows = [r for r in data["summary"] if isinstance(r, dict) and "policy" in r and "rate" in r]
        flow = f"{data.get('kind') or 'chat'} programs"
        points: dict[str, dict[str, Any]] = {}
        for r in rows:
            points.setdefault(str(r["rate"]), {})[r["policy"]] = r
        return _entries({flow: points}, _program_rows)
    rows = [
        r for r in data.get("rows") or [] if isinstance(r, dict) and {"rate", "system", "mean_s"} <= set(r)
    ]
    if rows:
        by_rate: dict[str, dict[str, Any]] = {}
        for r in rows:
            point = by_rate.setdefault(str(r["rate"]), {"rate": r["rate"], "systems": {}})
            point["systems"].setdefault(r["system"], []).append(r["mean_s"])
        return _entries({"LLM calls pausing for tools": by_rate}, _trial_rows)
    return {}


def _trial_rows(point: dict[str, Any]) -> Row:
    """One rate's {"rate", "systems": {system: [each trial's mean]}}: the mean over the trials."""
    out: Row = []
    for system, means in point["systems"].items():
        means = [m for m in map(_num, means) if m is not None]
        if means:
            out.append((system, _num(point["rate"]) or 0.0, sum(means) / len(means), means))
    return out


def _program_rows(row: dict[str, Any]) -> Row:
    return [
        (
            policy,
            _num(r["rate"]) or 0.0,
            _num(r.get("mean")),
            [x for x in map(_num, r.get("mean_range") or []) if x is not None],
        )
        for policy, r in row.items()
    ]


def unit(data: dict[str, Any]) -> str:
    """What arrives per second on the x axis: programs, requests (LLM calls) or queries."""
    if isinstance(data.get("summary"), list):
        return "programs/s"
    return (
        "requests/s"
        if any(isinstance(r, dict) and "mean_s" in r for r in data.get("rows") or [])
        else "queries/s"
    )


def host(data: dict[str, Any]) -> str:
    """The machine a page ran on, short: 'Intel Xeon, 2 cores'."""
    m = data.get("machine") or {}
    cpu = re.sub(r"\((R|TM)\)|\b(Processor|CPU)\b|\d+-Core|@.*", "", str(m.get("cpu") or "unknown CPU"))
    cpu = " ".join(w for w in cpu.split() if not re.fullmatch(r"\d+\w*", w) or w.isalpha())
    return f"{cpu or 'unknown CPU'}, {m.get('cores', '?')} cores"


def note(name: str, data: dict[str, Any]) -> str | None:
    """'SIMULATED' for a simulator page, 'LLM emulated' for a page whose LLM was an emulation."""
    settings = data.get("settings") if isinstance(data.get("settings"), dict) else {}
    if name.startswith("sim_") or data.get("simulated"):
        return "SIMULATED"
    if data.get("llm_emulated") or settings.get("llm_emulated"):
        return "LLM emulated"
    return None


def draw(data: dict[str, Any], path: Path, name: str = "") -> Panels:
    """Draw mean latency against offered load, one panel per flow, into `path` (a PNG); returns the
    curves plotted (nothing is written when the JSON has no load points, or one load: no curve)."""
    panels = series(data)
    if not any(len(s.rate) >= 2 for curves in panels.values() for s in curves.values()):
        return {}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    systems = list(dict.fromkeys(s for curves in panels.values() for s in curves))
    color = {s: f"C{i % 10}" for i, s in enumerate(systems)}  # one colour per system on every panel
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels) + 0.4, 3.6), squeeze=False)
    for ax, (flow, curves) in zip(axes[0], panels.items()):
        means = [m for s in curves.values() for m in s.mean if m > 0]
        for s in curves.values():
            bold = s.system == "teola" or (s.system.startswith("teola") and "teola" not in curves)
            ax.plot(
                s.rate,
                s.mean,
                marker="o",
                markersize=3.5,
                linewidth=2.2 if bold else 1.2,
                label=s.system,
                color=color[s.system],
            )
            if s.low != s.mean or s.high != s.mean:
                ax.fill_between(s.rate, s.low, s.high, alpha=0.18, color=color[s.system], linewidth=0)
        if means and max(means) / min(means) > 10:  # overload spans decades: a log axis, plain numbers
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
            ax.yaxis.set_major_formatter(ScalarFormatter())
            ax.yaxis.set_minor_formatter(NullFormatter())
        alone = any(r == 0 for s in curves.values() for r in s.rate)
        ax.set(
            title=flow,
            xlabel=f"offered load ({unit(data)}{'; 0 = one at a time' if alone else ''})",
            ylabel="mean latency (s)",
        )
        ax.set_ylim(bottom=0 if ax.get_yscale() == "linear" else None)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    banner = f"{name or path.stem}: latency against load ({host(data)})"
    extra = note(name, data)
    if extra:
        banner += f"  [{extra}]"
    if any(s.low != s.mean or s.high != s.mean for c in panels.values() for s in c.values()):
        banner += "\nline: mean latency; band: min-max of the trials' means"
    else:
        banner += "\none run: mean latency per load point"
    fig.suptitle(banner, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return panels


def plot_path(name: str, folder: Path) -> Path:
    return folder / f"{name}{SUFFIX}"


def write_load_plot(name: str, folder: Path) -> Path | None:
    """The page writer's call once <folder>/<name>.json is written: draw <name>_vs_load.png beside the
    page from that file (so a redraw gives the same plot); None, and nothing written, when the page has
    no load points or matplotlib is missing (a page never fails on its plot)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"[plots] no matplotlib: {name}{SUFFIX} not drawn (pip install 'teola[bench]')", flush=True)
        return None
    path = plot_path(name, folder)
    data = json.loads((folder / f"{name}.json").read_text())
    if not draw(data, path, name):
        return None
    print(f"[plots] wrote {path}", flush=True)
    return path


def redraw(names: list[str] | None = None, folder: Path | None = None) -> list[Path]:
    """Redraw the plots of `names` (default: every <name>_vs_load.png already drawn) from their
    committed <name>.json, in `folder` or else in whichever folder of bench/results holds it; raises
    naming a page whose JSON is missing or has no load points."""
    folders = [folder] if folder else result_dirs()
    if not names:
        names = sorted(p.name[: -len(SUFFIX)] for f in folders for p in f.glob(f"*{SUFFIX}"))
    written = []
    for name in names:
        home = next((f for f in folders if (f / f"{name}.json").exists()), None)
        if home is None:
            where = folder or "bench/results/<subject>"
            raise SystemExit(f"no {name}.json in {where}: its plot is drawn from the page's JSON")
        source = home / f"{name}.json"
        if not draw(json.loads(source.read_text()), plot_path(name, home), name):
            raise SystemExit(f"{source} has no load points to plot")
        written.append(plot_path(name, home))
    return written
