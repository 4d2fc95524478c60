"""`RunningOwners`: which queries (owners) have requests running on which engine instance, so the
engine scheduler can ask exactly those instances to abort a query that ended."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from teola.runtime.executors.executor import Instance


class RunningOwners:
    """Per instance: owner (query or program id) -> requests of it in batches running there."""

    def __init__(self) -> None:
        self._by_instance: dict[Instance, dict[str, int]] = {}

    def count(self, inst: Instance, spans: list[tuple[Any, int, int]], sign: int) -> None:
        """A batch of these spans (entry, first, end) started (sign 1) or landed (sign -1) on `inst`."""
        owners = self._by_instance.setdefault(inst, {})
        for e, a, b in spans:
            n = owners.get(e.query_id, 0) + sign * (b - a)
            if n > 0:
                owners[e.query_id] = n
            else:
                owners.pop(e.query_id, None)

    def running(self, owner: str) -> Iterator[tuple[Instance, int]]:
        """(instance, requests) for every instance running requests of `owner`."""
        for inst, owners in self._by_instance.items():
            n = owners.get(owner, 0)
            if n:
                yield inst, n
