"""The steady-state rules the SIMULATED steady-state studies share (bench/studies/sim/sim_steady.py):
how long a trace is, which arrivals are measured, whether a run reached steady state, when a load
sweep stops, and how throughput at equal latency is read across the knee of the latency curves.

- Trace: Poisson arrivals over warm-up + window + cool-down seconds, each a multiple of the baseline's
  unloaded mean latency m0 (WARMUP, WINDOW, COOLDOWN: 3, 10 and 2 x m0, at least `min_*` seconds
  each), the warm-up at least `settle` seconds. Only what arrives inside the window is measured: the
  warm-up lets the number of programs in the system settle from an empty start, the cool-down keeps
  arrivals (the load) on while the last measured ones finish; what arrives in the warm-up or
  cool-down is run, not counted.
- Settling (the warm-up's floor): from an empty start, Poisson arrivals at rate r with latencies L
  have r x E[min(L, t)] programs in the system at time t, against r x E[L] once settled (Little's
  law). cover(L, COVER) is the t where that reaches COVER (95%) of it; a heavy tail (ShareGPT: a few
  programs of 80 calls) makes it several times m0. Below the knee the baseline's latencies are at
  most KNEE x their unloaded values on average, so the warm-up is at least KNEE x cover over the
  programs' own unloaded latencies (bench/studies/sim/sim_steady_solo.py).
- Overdue: a measured program still unfinished OVERDUE x max(its own unloaded latency, `floor`) after
  its arrival makes the point overloaded (the run stops there); the floor is the workload's mean own
  unloaded latency. The limit is per program, so a long program running its normal length is not
  mistaken for a queue that never drains; the floor keeps a program of a few tokens (0.06 s alone)
  from being overdue because one iteration of a full batch takes longer than its whole run alone.
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
COVER = 0.95  # the share of the settled number of programs in the system the warm-up must reach
OVERDUE = 20.0  # x a program's own unloaded latency: unfinished by then, the point is overloaded


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


def trace_for(
    unloaded_mean: float,
    warmup: float = WARMUP,
    window: float = WINDOW,
    cooldown: float = COOLDOWN,
    min_warmup: float = 0.0,
    min_window: float = 0.0,
    min_cooldown: float = 0.0,
    settle: float = 0.0,
) -> Trace:
    """The trace for a baseline whose unloaded mean latency is `unloaded_mean` seconds; `settle`: the
    warm-up's floor from the programs' own latencies (KNEE x cover, module docstring)."""
    if not unloaded_mean > 0:
        raise ValueError(f"unloaded mean latency must be > 0 s, got {unloaded_mean}")
    return Trace(
        max(min_warmup, warmup * unloaded_mean, settle),
        max(min_window, window * unloaded_mean),
        max(min_cooldown, cooldown * unloaded_mean),
    )


def cover(latencies: list[float], frac: float = COVER) -> float:
    """The t at which E[min(L, t)] over `latencies` reaches `frac` x their mean: how long after an
    empty start the number of programs in the system reaches `frac` of its settled value."""
    xs = sorted(latencies)
    if not xs or not all(x >= 0 for x in xs) or not 0 < frac <= 1:
        raise ValueError("cover needs latencies >= 0 and 0 < frac <= 1")
    goal, n, below = frac * sum(xs) / len(xs), len(xs), 0.0
    # E[min(L, t)] = (sum of the latencies under t + t x how many are at least t) / n: linear between them
    for i, x in enumerate(xs):
        if (below + x * (n - i)) / n >= goal:
            return (goal * n - below) / (n - i)
        below += x
    return xs[-1]


def deadlines(
    arrivals: list[float], solos: list[float], factor: float = OVERDUE, floor: float = 0.0
) -> list[float]:
    """When each program becomes overdue: its arrival + `factor` x max(its own unloaded latency, `floor`)."""
    return [a + factor * max(s, floor) for a, s in zip(arrivals, solos)]


def overdue(
    arrivals: list[float],
    ends: list[float | None],
    solos: list[float],
    at: float,
    factor: float = OVERDUE,
    floor: float = 0.0,
) -> list[int]:
    """The programs (indices) unfinished at `at` (an end of None or after it) past their deadline."""
    return [
        i
        for i, (d, e) in enumerate(zip(deadlines(arrivals, solos, factor, floor), ends))
        if d <= at and (e is None or e > at)
    ]


def in_system(arrivals: list[float], ends: list[float | None], t: float) -> int:
    """Programs arrived by `t` and not finished by then (an end of None: never finished)."""
    return sum(1 for a, e in zip(arrivals, ends) if a <= t and (e is None or e > t))


def steady(
    arrivals: list[float], ends: list[float | None], trace: Trace, samples: int = 60
) -> dict[str, Any]:
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
        out[name] = {
            "rate": r,
            "lower_bound": bound,
            "ratio": ratio,
            "ratio_note": ">="
            if bound and not b_bound
            else ("<=" if b_bound and not bound else ("?" if bound and b_bound else "")),
        }
    return out


def past_knee(latency: float, unloaded: float, knee: float = KNEE) -> bool:
    """Whether a point's mean latency (inf / nan: overloaded) is past the knee."""
    return math.isnan(latency) or latency > knee * unloaded
