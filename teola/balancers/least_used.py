"""LeastUsed: route every call to the least-used instance (ties: the first in the list)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def default_load(inst: Any) -> float:
    """How used an instance is when no `load` callable is given: its `outstanding` requests
    (teola.runtime.Instance), else its `tokens`, else its `load` attribute."""
    for attr in ("outstanding", "tokens", "load"):
        v = getattr(inst, attr, None)
        if isinstance(v, (int, float)):
            return v
    raise TypeError(
        f"cannot tell the load of instance {inst!r}: give it an 'outstanding' count or pass load="
    )


class LeastUsed:
    """Route every call to the least-used instance."""

    name = "least_used"

    table = None  # keeps no program pins

    def __init__(self, load: Callable[[Any], float] | None = None) -> None:
        self.load = load or default_load

    def pick(self, instances: Sequence[Any]) -> Any:
        if not instances:
            return None
        best, key = None, None
        for inst in instances:
            k = self.load(inst)
            if best is None or key is None or k < key:
                best, key = inst, k
        return best

    def route(self, instances: Sequence[Any], program_id: str, tokens: int) -> Any:
        return self.pick(instances)
