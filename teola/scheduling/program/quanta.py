"""Quanta that span the workload's call service: the rule teola follows where Autellix gives none.

Autellix (§4.2) names K queues with growing quanta but publishes no values. With a fixed base (teola's
earlier 0.05 s x 2^i over 8 queues, whose last queue starts at 6.35 s) a workload whose calls take
longer than that puts every program in the last queue after one call, where PLAS and ATLAS reduce to
first-come first-served. The rule (`quanta="observed"`, the default):

    the last queue starts at the `percentile`-th percentile of the service of one completed call,
    i.e. base_quantum * (growth**(K-1) - 1) / (growth - 1) = that percentile

(for growth 1: base_quantum * (K-1)), re-fitted every `refit_every` completed calls over the last
`window` of them, from the first `min_calls` on; until then the configured base quantum holds.
`quanta="fixed"` keeps base_quantum * growth**i for the whole run (teola's earlier default).
"""

from __future__ import annotations

import math
from collections import deque

QUANTA_RULES = ("observed", "fixed")


class ObservedQuanta:
    """Records completed calls' service and proposes the base quantum of the rule above."""

    def __init__(
        self,
        num_queues: int,
        growth: float,
        percentile: float = 95.0,
        min_calls: int = 16,
        refit_every: int = 16,
        window: int = 512,
    ) -> None:
        if not 0 < percentile <= 100:
            raise ValueError(f"quanta: percentile must be in (0, 100], got {percentile!r}")
        if not isinstance(min_calls, int) or min_calls < 1:
            raise ValueError(f"quanta: min_calls must be an int >= 1, got {min_calls!r}")
        if not isinstance(refit_every, int) or refit_every < 1:
            raise ValueError(f"quanta: refit_every must be an int >= 1, got {refit_every!r}")
        self.percentile = percentile
        self.min_calls = min_calls
        self.refit_every = refit_every
        self.services: deque[float] = deque(maxlen=max(window, min_calls))
        self.span = _span(num_queues, growth)
        self.seen = 0
        self.refits = 0

    def record(self, service: float) -> float | None:
        """A call completed with `service`: the new base quantum when it is time to re-fit (and
        the percentile is above 0), else None."""
        self.services.append(service)
        self.seen += 1
        if self.seen < self.min_calls or (self.seen - self.min_calls) % self.refit_every:
            return None
        top = percentile(sorted(self.services), self.percentile)
        if top <= 0 or self.span <= 0:
            return None
        self.refits += 1
        return top / self.span


def _span(num_queues: int, growth: float) -> float:
    """Where the last queue starts, in units of the base quantum: sum of growth**i for i < K-1."""
    return float(num_queues - 1) if growth == 1 else (growth ** (num_queues - 1) - 1) / (growth - 1)


def percentile(values: list[float], pct: float) -> float:
    """The nearest-rank percentile of sorted `values` (the smallest value with at least pct% of
    the values at or below it)."""
    if not values:
        raise ValueError("percentile of no values")
    rank = max(1, math.ceil(pct / 100 * len(values)))
    return values[rank - 1]
