"""Which runner executes a batch the engine scheduler decided: a table read top to bottom, the first
row whose condition holds wins. The scheduler states the batch's facts; nothing else chooses."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from engines.requests import PrimOp
from teola.runtime.engine_tier.batch_runner import run_batch, run_each, run_item_stream

STREAM_OP = PrimOp.PARTIAL_DECODING.value


class Runner(enum.Enum):
    CALLS = "calls"  # each entry a preemptible call on its own stream (preemption.Preemptor)
    ITEMS = "items"  # a Partial Decoding batch: items go downstream as they are parsed
    EACH = "each"  # one engine call per entry, all at once: each entry's results as they land
    BATCH = "batch"  # one engine call: every entry's results together (text streamed where asked)


@dataclass(frozen=True, slots=True)
class BatchFacts:
    op: str
    entries: int  # entries (picks) in the batch
    preemptible: bool  # a preemptive policy, and picks it runs as calls (teola.scheduling.preemption)
    continuous: bool  # the engine batches continuously (vLLM)
    returns_each: bool  # the policy wants each entry's results as soon as they land


TABLE: tuple[tuple[Runner, Callable[[BatchFacts], bool]], ...] = (
    (Runner.CALLS, lambda f: f.preemptible),
    (Runner.ITEMS, lambda f: f.op == STREAM_OP),
    (Runner.EACH, lambda f: f.continuous and f.returns_each and f.entries > 1),
    (Runner.BATCH, lambda f: True),
)

# the runners of a taken batch; Runner.CALLS is the Preemptor's, which takes whole entries itself
BATCH_RUNNERS = {Runner.ITEMS: run_item_stream, Runner.EACH: run_each, Runner.BATCH: run_batch}


def choose(facts: BatchFacts) -> Runner:
    return next(runner for runner, holds in TABLE if holds(facts))
