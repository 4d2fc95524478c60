"""RoundRobin: route calls to instances in cyclic order, ignoring load and locality."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class RoundRobin:
    """Route calls to instances in cyclic order (Kubernetes' default), ignoring load and locality."""

    name = "round_robin"

    table = None  # keeps no program pins

    def __init__(self) -> None:
        self._next = 0

    def pick(self, instances: Sequence[Any]) -> Any:
        if not instances:
            return None
        inst = instances[self._next % len(instances)]
        self._next += 1
        return inst

    def route(self, instances: Sequence[Any], program_id: str, tokens: int) -> Any:
        return self.pick(instances)
