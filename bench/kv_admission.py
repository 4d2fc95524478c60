"""Admission bound by KV blocks for bench.sim_lamps (vLLM's rule: a waiting request is admitted
only when its blocks can be allocated), with the policy's order deciding who waits.

In LAMPS (and INFERCEPT) the scheduler's own waiting queue is what waits for KV: vLLM admits
from its head while blocks can be allocated, so the order of that queue (FCFS, or LAMPS' ranking)
decides who gets memory when it is short. teola's admission for `lamps` / `sjf` / `fcfs`
(teola.runtime.preemption) caps the number of calls in the engine, not their KV; with a cap above
what the KV holds, the surplus would wait in the engine's own arrival-order queue and every
policy would look the same. `KVAdmission` wraps the policy so teola sends calls only while the
simulated engine has free KV for them (`free_tokens`): the rest wait in teola's queue, ranked.
At most one call sent ahead waits in the engine (the first call of a batch always goes, so the
engine is never left idle with work queued). Pure except for reading the engine's pool and
waiting list; it changes neither.
"""
from __future__ import annotations

from typing import Any

from teola.runtime.policies.base import Decision, Limits, RequestQueue


def free_tokens(free_blocks: int, block_size: int, waiting: list[int]) -> int | None:
    """Tokens of KV teola may still send to the engine: the free blocks' tokens minus what the
    calls already waiting in the engine need (`waiting`: their context tokens). None: hold (calls
    wait in the engine and the free KV does not cover them); else at least 1, so an engine with
    nothing waiting always gets the next call."""
    left = free_blocks * block_size - sum(waiting)
    if waiting and left <= 0:
        return None
    return max(1, left)


class KVAdmission:
    """`policy` with its batches limited to the KV the engine `llm` (an engines.sim_llm.SimLLM)
    has free (see the module docstring); every other attribute is the policy's."""

    def __init__(self, policy: Any, llm: Any) -> None:
        self.policy, self.llm = policy, llm
        self.held = 0  # scheduling rounds held because the engine's KV was spoken for

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)

    def schedule(self, queue: RequestQueue, now: float, limits: Limits) -> Decision:
        pool = self.llm.pool
        free = free_tokens(pool.free, pool.block_size, [len(s.ids) for s in self.llm.waiting])
        if free is None:
            self.held += 1
            return Decision()
        tokens = free if not limits.token_budget else min(free, limits.token_budget)
        return self.policy.schedule(queue, now, Limits(limits.max_batch, limits.max_efficient_batch, tokens))
