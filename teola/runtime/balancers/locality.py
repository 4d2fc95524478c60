"""Program-aware call routing across engine instances (Autellix §4.3, Algorithm 2).

`route(instances, program_id, tokens)` returns the instance one LLM call should run on:
  - LocalityAware: a call of at most `threshold` tokens (default 2048) goes to the least-used
    instance (short prompts mostly share only the system prompt, which every instance caches);
    a longer call goes to its program's instance, recorded in the process table the first time
    (so the program's growing context stays in one instance's prefix cache);
  - LeastUsed: always the least-used instance;
  - RoundRobin: instances in cyclic order, whatever the load.
"Used" is the instance's load: `load(instance)` if a callable is given, else the instance's
`outstanding` attribute (requests in flight, teola.runtime.executor.Instance), else its `tokens`.
Ties go to the lowest position in `instances`. Pass every live instance to `route`, not only the
free ones: a long call waits for its program's instance rather than losing its cached context
(a program is re-pinned only when its instance is no longer in the list).

Each balancer also has `pick(instances)` (no call information: least used / next in cycle), the
interface of teola.runtime.balancer.LeastLoaded, so it can stand in where the runtime picks an
instance before the policy picks the calls.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from teola.runtime.process_table import ProcessTable

DEFAULT_THRESHOLD = 2048


def _default_load(inst: Any) -> float:
    for attr in ("outstanding", "tokens", "load"):
        v = getattr(inst, attr, None)
        if isinstance(v, (int, float)):
            return v
    raise TypeError(f"cannot tell the load of instance {inst!r}: give it an 'outstanding' count or pass load=")


class LeastUsed:
    """Route every call to the least-used instance."""

    name = "least_used"

    def __init__(self, load: Callable[[Any], float] | None = None) -> None:
        self.load = load or _default_load

    def pick(self, instances: Sequence[Any]) -> Any:
        if not instances:
            return None
        best, key = None, None
        for inst in instances:
            k = self.load(inst)
            if best is None or k < key:
                best, key = inst, k
        return best

    def route(self, instances: Sequence[Any], program_id: str, tokens: int) -> Any:
        return self.pick(instances)


class RoundRobin:
    """Route calls to instances in cyclic order (Kubernetes' default), ignoring load and locality."""

    name = "round_robin"

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


class LocalityAware:
    """Autellix Algorithm 2. `table` is the process table shared with the scheduler (a private one
    if not given); a program's pin disappears with `table.end_program(pid)`."""

    name = "locality"

    def __init__(self, threshold: int = DEFAULT_THRESHOLD, table: ProcessTable | None = None,
                 load: Callable[[Any], float] | None = None) -> None:
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


_BALANCERS: dict[str, Callable[..., Any]] = {"locality": LocalityAware, "least_used": LeastUsed,
                                             "round_robin": RoundRobin}
_OPTIONS: dict[str, frozenset[str]] = {"locality": frozenset({"threshold"}), "least_used": frozenset(),
                                       "round_robin": frozenset()}


def balancer_names() -> list[str]:
    """The per-call balancers `make_balancer` builds."""
    return sorted(_BALANCERS)


def make_balancer(name: str, *, load: Callable[[Any], float] | None = None, table: ProcessTable | None = None,
                  **options: Any) -> Any:
    """Build a balancer by name: "locality", "least_used" or "round_robin". `load` (how used an
    instance is) goes to the balancers that compare loads, `table` (the process table to keep pins
    in) to the locality balancer; the others ignore them. Other options go to the constructor
    (e.g. threshold=2048 for "locality"); an unknown option raises ValueError naming it."""
    if name not in _BALANCERS:
        raise ValueError(f"unknown load balancer {name!r}; known: {', '.join(balancer_names())}")
    cls = _BALANCERS[name]
    allowed = _OPTIONS[name]
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(f"load balancer {name!r}: unknown option(s) {unknown}; "
                         f"options are {sorted(allowed) or 'none'}")
    if name == "locality":
        return cls(table=table, load=load, **options)
    if name == "least_used":
        return cls(load=load)
    return cls()
