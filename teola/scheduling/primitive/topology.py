"""Topology-aware batching (Teola Algorithm 2, Event 2).

Entries are grouped into one bucket per query; buckets are visited by the earliest arrival among
their entries; from each bucket only the entries of the highest depth (the most contributive to
the query's progress) give requests, until the slots are used up. Slots are the engine's maximum
efficient batch, or for LLM engines with a token budget, tokens (and at most max_batch requests).
A batch holds one op: the op of the first bucket's deepest entry.

On an engine that batches continuously (vLLM) each entry of a batch gets its results as soon as its
own requests end (`returns_each`; teola.runtime.engine_tier.engine_scheduler), so a query's short decode never
waits for a longer one it was batched with; batching decides what runs together, not who waits."""

from __future__ import annotations

from teola.scheduling.base import Decision, Filler, Limits, Policy, RequestQueue


class TopologyPolicy(Policy):
    name = "topology"
    returns_each = True

    def schedule(self, queue: RequestQueue, now: float, limits: Limits) -> Decision:
        if not queue:
            return Decision()
        if not isinstance(queue, RequestQueue):  # a plain list of entries in arrival order
            queue = RequestQueue(queue)
        slots = (
            limits.max_batch if limits.token_budget > 0 else min(limits.max_efficient_batch, limits.max_batch)
        )
        fill = Filler(slots, limits.token_budget)
        op = None
        for bucket in queue.buckets():  # by earliest arrival
            if op is None:
                op = max(bucket, key=lambda e: e.depth).op
            cands = [e for e in bucket if e.op == op]
            if not cands:
                continue
            top = max(e.depth for e in cands)
            for e in cands:
                if e.depth == top:
                    fill.take(e)
                    if fill.full:
                        break
            if fill.full:
                break
        return Decision(picks=fill.picks)
