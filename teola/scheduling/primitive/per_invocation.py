"""Per-invocation batching (PO): one primitive's requests at a time, oldest first, with no waiting:
the requests of one invocation are batched together and never with another's."""

from __future__ import annotations

from teola.scheduling.base import Decision, Filler, Limits, Policy, RequestQueue


class PerInvocationPolicy(Policy):
    name = "po"

    def schedule(self, queue: RequestQueue, now: float, limits: Limits) -> Decision:
        if not queue:
            return Decision()
        fill = Filler(limits.max_batch, limits.token_budget)
        fill.take(next(iter(queue)))
        return Decision(picks=fill.picks)
