"""Fair queuing between tenants on one engine: when entries of several tenants wait, each tenant's
share, not arrival order, decides who waits.

Start-time fair queuing over requests: each tenant has a finish tag, advanced by
``requests dispatched / weight`` whenever its requests go to the engine, from at least the virtual
time (the start tag of the last service), so a tenant that was idle cannot bank credit. The batching
policy then sees only the entries of tenants within one quantum (the engine's max efficient batch)
of the lowest tag: tenants near an equal share batch together; a tenant far ahead of the others (a
flood) waits until they have caught up or have nothing queued. With one tenant queued nothing is
filtered, so single-tenant scheduling is exactly the policy's own.

Pure logic over `RequestQueue`s: the engine scheduler asks for a `view` before each policy call
and reports what it dispatched, and from which queue, with `served`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from teola.scheduling.base import Pending, RequestQueue


class TenantShares:
    """Per-engine fair-queuing state. `weights`: tenant -> share weight (> 0; unlisted tenants 1).
    `quantum`: how far (in weighted requests) a tenant may be ahead of the furthest-behind waiting
    tenant and still be scheduled now."""

    def __init__(self, weights: Mapping[str, float] | None = None, quantum: int = 1) -> None:
        self.weights = check_weights(weights or {})
        self.quantum = max(1, int(quantum))
        self.finish: dict[str, float] = {}
        self.virtual = 0.0

    def weight(self, tenant: str) -> float:
        return self.weights.get(tenant, 1.0)

    def view(self, queue: RequestQueue) -> RequestQueue | None:
        """The entries the policy may pick from now, or None when every queued entry may be picked
        (at most one tenant waiting, or all waiting tenants within a quantum of each other)."""
        tenants = queue.tenants()
        if len(tenants) < 2:
            return None
        tags = self._tags(set(tenants))
        low = min(tags.values())
        allowed = {t for t, tag in tags.items() if tag - low < self.quantum}
        if len(allowed) == len(tenants):
            return None
        return RequestQueue(e for e in queue if e.tenant in allowed)

    def served(self, entries: Iterable[tuple[Pending, int]], queue: RequestQueue | None = None) -> None:
        """`count` requests of each entry were dispatched from `queue`: charge their tenants. The
        virtual time moves to the lowest tag among the tenants still waiting there."""
        charged: dict[str, int] = {}
        for e, count in entries:
            charged[e.tenant] = charged.get(e.tenant, 0) + count
        if not charged:
            return
        tags = self._tags(set(charged) | set(queue.tenants() if queue is not None else ()))
        self.virtual = max(self.virtual, min(tags.values()))
        for tenant, count in charged.items():
            self.finish[tenant] = tags[tenant] + count / self.weight(tenant)
        if len(self.finish) > 64:  # a tag at or below the virtual time says nothing more
            self.finish = {t: f for t, f in self.finish.items() if f > self.virtual}

    def _tags(self, tenants: set[str]) -> dict[str, float]:
        """Each tenant's tag: its finish tag, at least the virtual time."""
        return {t: max(self.finish.get(t, self.virtual), self.virtual) for t in tenants}


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """`weights` as a dict of positive floats; ValueError naming a bad entry."""
    out: dict[str, float] = {}
    for tenant, w in weights.items():
        if not isinstance(tenant, str) or isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0:
            raise ValueError(
                f"tenant_shares: {tenant!r} -> {w!r}; each share must be a number > 0 for a tenant name"
            )
        out[tenant] = float(w)
    return out
