"""Topology-aware batching (Teola Algorithm 2, Event 2), with batches joined across queries only
where the engine's costs say it pays.

Entries are grouped into one bucket per query; buckets are visited in the `order` below; from
each bucket only the entries of the highest depth (the most contributive to the query's progress)
give requests, until the slots are used up. Slots are the engine's maximum
efficient batch, or for LLM engines with a token budget, tokens (and at most max_batch requests).
A batch holds one op: the op of the first bucket's deepest entry.

Joining by cost (`join_by_cost`, on by default): on an engine that reports its op's costs (a
request's `base_s` and an item's `item_s`, engines.machine.op_costs; the sentence-transformers
engines and pgvector do, LLMs do not), another query's entries join the batch only when

    delayed * added <= (1 + behind) * base_s

where `added` is the seconds its requests add to the batch (each item's `item_s`, scaled by its
text's length against the probe's items), `delayed` counts the queries whose results the longer
batch delays (those already in it and those passed over, which run after it) and `behind` the
queries queued after it for the same op, each of which one more batch delays by `base_s`. It is
the sum of the queries' completion times under the linear cost, compared with the query run in
the next batch. On a GPU a batch's fixed cost dwarfs an item's and queries join as Algorithm 2
has them; on CPU cores an item costs about as much alone as in a batch, and two queries' rerankings
batched together only make the first wait for the second's pairs (measured on the emulated-GPU
deployment page, advanced RAG at 8x). Off, or with no costs reported: Algorithm 2's batches.

Bucket order (`order`): "query" (the default) visits buckets by their query's start (then by their
oldest entry's arrival), so an older query's entry that has just become ready goes before a younger
query's entries that were queued earlier (an indexing slice with slack while its own query's
expansion decodes); "entry" visits them by their oldest entry's arrival, as Algorithm 2 line 9 does.
Measured on the emulated-GPU deployment (advanced RAG, small documents, 70B profile, 2 trials, one
run): at 8x teola 8.48 s by entry, 7.83 s by query, LangGraph 8.16 s; alone and at 4x within 0.01 s.
With `join_by_cost=False, order="entry"` the policy is Algorithm 2 as published.

On an engine that batches continuously (vLLM) each entry of a batch gets its results as soon as its
own requests end (`returns_each`; teola.runtime.engine_tier.engine_scheduler), so a query's short decode never
waits for a longer one it was batched with; batching decides what runs together, not who waits."""

from __future__ import annotations

from collections.abc import Sequence

from engines.machine.op_costs import OpCost, request_chars
from teola.scheduling.base import Decision, Filler, Limits, Pending, Policy, RequestQueue

ORDERS = ("entry", "query")


class TopologyPolicy(Policy):
    name = "topology"
    returns_each = True

    def __init__(self, join_by_cost: bool = True, order: str = "query") -> None:
        if not isinstance(join_by_cost, bool):
            raise ValueError(
                f"policy 'topology': option join_by_cost must be true or false, got {join_by_cost!r}"
            )
        if order not in ORDERS:
            raise ValueError(f"policy 'topology': option order must be one of {ORDERS}, got {order!r}")
        self.join_by_cost = join_by_cost
        self.order = order

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
        cost: OpCost | None = None
        buckets = queue.buckets(by_query=self.order == "query")
        joined = passed = 0
        for k, bucket in enumerate(buckets):
            if op is None:
                op = max(bucket, key=lambda e: e.depth).op
                cost = limits.op_costs.get(op) if self.join_by_cost and limits.token_budget == 0 else None
            cands = [e for e in bucket if e.op == op]
            if not cands:
                continue
            top = max(e.depth for e in cands)
            tops = [e for e in cands if e.depth == top]
            if joined and cost is not None:
                behind = sum(1 for b in buckets[k + 1 :] if any(e.op == op for e in b))
                if not pays_to_join(cost, added_seconds(cost, tops, fill.slots), joined + passed, behind):
                    passed += 1
                    continue
            joined += 1
            for e in tops:
                fill.take(e)
                if fill.full:
                    break
            if fill.full:
                break
        return Decision(picks=fill.picks)


def added_seconds(cost: OpCost, entries: Sequence[Pending], slots: int) -> float:
    """The seconds the next requests of `entries` (at most `slots` of them) add to a batch."""
    seconds = 0.0
    for e in entries:
        for body in e.requests[e.taken : e.taken + min(e.remaining, slots)]:
            seconds += cost.item_seconds(request_chars(body))
        slots -= min(e.remaining, slots)
        if slots <= 0:
            break
    return seconds


def pays_to_join(cost: OpCost, added: float, delayed: int, behind: int) -> bool:
    """Whether a query whose requests add `added` seconds joins the batch (module doc): the
    `delayed` queries each wait `added` more, against one batch's `base_s` saved for it and the
    `behind` queries after it."""
    return delayed * added <= (1 + behind) * cost.base_s
