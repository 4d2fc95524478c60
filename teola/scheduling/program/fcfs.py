"""First come, first served LLM calls under admission control: vLLM's own order (LAMPS' and
INFERCEPT's baseline scheduling) with the same admission as `lamps` and `sjf`, so a comparison
with them differs only in the order calls run.

Each decoding call runs as its own engine stream and returns when it is done (continuous batching,
as in vLLM), at most the engine's max efficient batch of calls run at once, and none is preempted
(teola.runtime.engine_tier.preemption). Unlike `fifo` (Teola's strawman, which sends a batch whose calls all
return when its last one ends), a short call never waits for a long one it was batched with."""

from __future__ import annotations

from teola.scheduling.base import Pending, RankedAdmission


class FCFSPolicy(RankedAdmission):
    name = "fcfs"

    def rank(self, e: Pending) -> float:
        return e.arrival
