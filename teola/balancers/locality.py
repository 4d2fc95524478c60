"""Program-aware call routing across engine instances (Autellix §4.3, Algorithm 2).

`route(instances, program_id, tokens)` returns the instance one LLM call should run on: a call of
at most `threshold` tokens (default 2048) goes to the least-used instance (short prompts mostly
share only the system prompt, which every instance caches); a longer call goes to its program's
instance, recorded in the process table the first time (so the program's growing context stays in
one instance's prefix cache). "Used" is the instance's load (`least_used.default_load` unless a
`load` callable is given); ties go to the lowest position in `instances`. Pass every live instance
to `route`, not only the free ones: a long call waits for its program's instance rather than losing its cached
context (a program is re-pinned only when its instance is no longer in the list).

`pick(instances)` (no call information) is the least-used instance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from teola.balancers.least_used import LeastUsed
from teola.scheduling.process_table import ProcessTable

DEFAULT_THRESHOLD = 2048


class LocalityAware:
    """Autellix Algorithm 2. `table` is the process table shared with the scheduler (a private one
    if not given); a program's pin disappears with `table.end_program(pid)`."""

    name = "locality"

    def __init__(
        self,
        threshold: int = DEFAULT_THRESHOLD,
        table: ProcessTable | None = None,
        load: Callable[[Any], float] | None = None,
    ) -> None:
        if not isinstance(threshold, int) or threshold < 0:
            raise ValueError(f"locality balancer: threshold must be an int >= 0 tokens, got {threshold!r}")
        self.threshold = threshold
        self.table = table if table is not None else ProcessTable()
        self.least = LeastUsed(load)

    def pick(self, instances: Sequence[Any]) -> Any:
        return self.least.pick(instances)

    def route(self, instances: Sequence[Any], program_id: str, tokens: int) -> Any:
        """The instance for one call of `program_id` with `tokens` prompt tokens."""
        if not instances:
            return None
        if tokens <= self.threshold:
            return self.least.pick(instances)
        pinned = self.table.engine_of(program_id)
        if pinned is not None:
            for inst in instances:
                if inst is pinned:
                    return inst
            # the pinned instance is gone (or not offered); re-pin below
        inst = self.least.pick(instances)
        self.table.assign_engine(program_id, inst)
        return inst
