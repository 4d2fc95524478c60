"""The steady-state rules the SIMULATED steady-state studies share (bench/studies/sim/sim_steady.py):
how long a trace is, which arrivals are measured, whether a run reached steady state, when a load
sweep stops, and how throughput at equal latency is read across the knee of the latency curves.

- Trace: Poisson arrivals over warm-up + window + cool-down seconds, each a multiple of the baseline's
  unloaded mean latency m0 (WARMUP, WINDOW, COOLDOWN: 3, 10 and 2 x m0, so arrivals span 15 x m0, at
  least `min_*` seconds each). Only what arrives inside the window is measured: the warm-up lets the
  number of programs in the system settle from an empty start, the cool-down keeps arrivals (the load)
  on while the last measured ones finish; what arrives in the warm-up or cool-down is run, not counted.
- Steady: the number of programs in the system (arrived, not yet finished), averaged over the
  window's last third, is at most STEADY_GROWTH x its average over the window's first third + 2
  (a queue that keeps growing is not a steady state; the +2 keeps a light load with 0-1 programs in
  the system from failing on noise).
- Sweep: loads go upward on a fixed grid until the baseline's mean latency passes KNEE x its unloaded
  mean (the knee), or it is overloaded (its measured programs unfinished by a time limit).
- Throughput at equal latency: for a target latency T, a system's sustainable rate is where its
  latency curve (mean latency against arrival rate, swept upward) first crosses T, interpolated
  linearly in rate between the two swept points around the crossing; an overloaded point counts as
  above every target, so a crossing between a finite point and an overloaded one is read at the
  finite point's rate (a lower bound). A curve still under T at its last point gives that point's
  rate as a lower bound (">="); one already over T at its first point gives none. The gain is the
  system's rate over the baseline's at the same T.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

WARMUP, WINDOW, COOLDOWN = 3.0, 10.0, 2.0  # x the baseline's unloaded mean latency
KNEE = 5.0  # the sweep stops once the baseline's mean latency passes KNEE x its unloaded mean
STEADY_GROWTH = 1.2


@dataclass(frozen=True)
class Trace:
    """Seconds of arrivals before, inside and after the measured window."""

    warmup: float
    window: float
    cooldown: float

    @property
    def horizon(self) -> float:
        return self.warmup + self.window + self.cooldown

    def measured(self, arrival: float) -> bool:
        """Whether an arrival at `arrival` (seconds from the trace's start) is measured."""
        return self.warmup <= arrival < self.warmup + self.window


def trace_for(unloaded_mean: float, warmup: float = WARMUP, window: float = WINDOW, cooldown: float = COOLDOWN,
              min_warmup: float = 0.0, min_window: float = 0.0, min_cooldown: float = 0.0) -> Trace:
    """The trace for a baseline whose unloaded mean latency is `unloaded_mean` seconds."""
    if not unloaded_mean > 0:
        raise ValueError(f"unloaded mean latency must be > 0 s, got {unloaded_mean}")
    return Trace(max(min_warmup, warmup * unloaded_mean), max(min_window, window * unloaded_mean),
                 max(min_cooldown, cooldown * unloaded_mean))


def in_system(arrivals: list[float], ends: list[float | None], t: float) -> int:
    """Programs arrived by `t` and not finished by then (an end of None: never finished)."""
    return sum(1 for a, e in zip(arrivals, ends) if a <= t and (e is None or e > t))


def steady(arrivals: list[float], ends: list[float | None], trace: Trace, samples: int = 60) -> dict[str, Any]:
    """The steady-state test (module docstring) on the programs in the system over the window."""
    ts = [trace.warmup + trace.window * (i + 0.5) / samples for i in range(samples)]
    counts = [in_system(arrivals, ends, t) for t in ts]
    third = max(1, samples // 3)
    first, last = sum(counts[:third]) / third, sum(counts[-third:]) / third
    return {"in_system_first": first, "in_system_last": last, "steady": last <= STEADY_GROWTH * first + 2}


def crossing(points: list[tuple[float, float]], target: float) -> tuple[float | None, bool]:
    """Where a latency curve (rate, latency) first crosses `target` going up in rate (module docstring);
    the second value is True when the rate is a lower bound (the curve never crossed, or it crossed
    into an overloaded point: latency inf or nan)."""
    pts = sorted((r, lat if not math.isnan(lat) else math.inf) for r, lat in points)
    if not pts or pts[0][1] > target:
        return None, False
    for (r0, l0), (r1, l1) in zip(pts, pts[1:]):
        if l1 > target:
            if math.isinf(l1):
                return r0, True
            return r0 + (r1 - r0) * (target - l0) / (l1 - l0), False
    return pts[-1][0], True


def equal_latency(curves: dict[str, list[tuple[float, float]]], base: str, target: float) -> dict[str, Any]:
    """Each system's rate at latency `target` and its ratio to `base`'s (None where either is none)."""
    out: dict[str, Any] = {}
    b, b_bound = crossing(curves.get(base, []), target)
    for name, pts in curves.items():
        r, bound = crossing(pts, target)
        ratio = r / b if r is not None and b else None
        out[name] = {"rate": r, "lower_bound": bound, "ratio": ratio,
                     "ratio_note": ">=" if bound and not b_bound else ("<=" if b_bound and not bound else
                                                                       ("?" if bound and b_bound else ""))}
    return out


def past_knee(latency: float, unloaded: float, knee: float = KNEE) -> bool:
    """Whether a point's mean latency (inf / nan: overloaded) is past the knee."""
    return math.isnan(latency) or latency > knee * unloaded
