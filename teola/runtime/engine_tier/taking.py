"""What a policy's picks take from their entries once the engine scheduler has chosen an instance:
the next requests of each entry as one batch (with each entry's span in it and the batch's estimated
tokens), or, for preemptible calls, each pick's whole entry started as one call of the preemptor."""

from __future__ import annotations

from typing import Any

from teola.runtime.engine_tier.engine_context import Span
from teola.runtime.engine_tier.preemption import Preemptor
from teola.runtime.executors.executor import Instance
from teola.scheduling.base import Pick, RequestQueue


def take(
    op: str, picks: list[Pick], queue: RequestQueue, *, policy: str, llm: bool
) -> tuple[list[dict[str, Any]], list[Span], int]:
    """The picked requests taken from their entries: the batch's requests, their spans per
    entry and their estimated tokens. `policy` names the policy in errors; on an `llm` engine each
    taken request's record is owned by its query (so the engine can abort the query's requests)."""
    requests: list[dict[str, Any]] = []
    spans: list[Span] = []
    tokens = 0
    for p in picks:
        e = p.entry
        if e.op != op:
            raise AssertionError(f"policy {policy!r} mixed ops {op} and {e.op} in one batch")
        if p.count < 1 or p.count > e.remaining:
            raise AssertionError(f"policy {policy!r} picked {p.count} of {e.remaining} requests")
        a = e.taken
        b = a + p.count
        e.taken = b
        for rec in e.records[a:b]:
            if p.priority is not None:
                rec.priority = p.priority
            if llm:
                rec.owner = e.query_id  # lets the engine abort this query's requests (EngineScheduler.abort)
        reqs = [e.wire(i) for i in range(a, b)]
        if e.tokens is not None:
            tokens += sum(e.tokens[a:b])
        requests.extend(reqs)
        spans.append((e, a, b))
        if b == len(e.requests):
            queue.discard(e)
    return requests, spans, tokens


def start_calls(preemptor: Preemptor, inst: Instance, picks: list[Pick], queue: RequestQueue) -> None:
    """Each pick's whole entry starts as one preemptible call (preemption.py: admission)."""
    for p in picks:
        e = p.entry
        p.count = e.remaining  # a batched call is admitted whole
        e.taken = len(e.requests)
        queue.discard(e)
        for rec in e.records:
            rec.priority, rec.owner = p.priority or 0, e.query_id
        preemptor.start(inst, p, queue)
