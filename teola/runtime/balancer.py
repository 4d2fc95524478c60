"""Picks the engine instance for the next batch: the least loaded among those that can take one
(outstanding requests for general engines, occupied token slots for LLM engines)."""
from __future__ import annotations

from typing import Sequence

from teola.runtime.executor import Instance


class LeastLoaded:
    def __init__(self, by_tokens: bool = False, token_budget: int = 0) -> None:
        self.by_tokens = by_tokens
        self.token_budget = token_budget

    def free(self, inst: Instance) -> bool:
        if inst.inflight >= inst.max_inflight:
            return False
        return not (self.token_budget > 0 and inst.inflight > 0 and inst.tokens >= self.token_budget)

    def pick(self, instances: Sequence[Instance]) -> Instance | None:
        best, key = None, None
        for inst in instances:
            if not self.free(inst):
                continue
            k = inst.tokens if self.by_tokens else inst.outstanding
            if best is None or k < key:
                best, key = inst, k
        return best
