"""LeastLoaded, the default "least_loaded" balancer: all calls wait in one shared queue and each
batch goes to the least loaded instance that can take one (outstanding requests for general
engines, occupied token slots for LLM engines). Instances are duck-typed: `inflight`,
`max_inflight`, `outstanding` and `tokens` (teola.runtime.Instance)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class LeastLoaded:
    """Picks the instance for the next batch from one shared queue."""

    name = "least_loaded"

    def __init__(self, by_tokens: bool = False, token_budget: int = 0) -> None:
        self.by_tokens = by_tokens
        self.token_budget = token_budget

    def free(self, inst: Any) -> bool:
        if inst.inflight >= inst.max_inflight or not getattr(inst, "healthy", True):
            return False
        if self.by_tokens and inst.inflight > 0 and inst.outstanding >= inst.profile.max_batch:
            return False  # an LLM instance already runs as many requests as it can at once
        return not (self.token_budget > 0 and inst.inflight > 0 and inst.tokens >= self.token_budget)

    def pick(self, instances: Sequence[Any]) -> Any:
        best, key = None, None
        for inst in instances:
            if not self.free(inst):
                continue
            k = inst.tokens if self.by_tokens else inst.outstanding
            if best is None or k < key:
                best, key = inst, k
        return best
