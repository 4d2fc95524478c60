"""How an engine with several instances spreads its work (`Engine(..., balancer=NAME)`):
  - "least_loaded" (default, `LeastLoaded`): one shared queue; each batch goes to the least loaded
    instance that can take one;
  - per-call routers (Autellix §4.3), which route each call to one instance's own queue when it
    arrives: "locality" (Algorithm 2, `LocalityAware`), "least_used", "round_robin".
Pure logic over duck-typed instances; the engine scheduler (teola.runtime) applies them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from teola.balancers.least_loaded import LeastLoaded
from teola.balancers.least_used import LeastUsed
from teola.balancers.locality import DEFAULT_THRESHOLD, LocalityAware
from teola.balancers.round_robin import RoundRobin
from teola.scheduling.process_table import ProcessTable

DEFAULT_BALANCER = LeastLoaded.name

# per-call routers and the options each takes
_ROUTERS: dict[str, tuple[Callable[..., Any], frozenset[str]]] = {
    LocalityAware.name: (LocalityAware, frozenset({"threshold"})),
    LeastUsed.name: (LeastUsed, frozenset()),
    RoundRobin.name: (RoundRobin, frozenset()),
}


def balancer_names() -> list[str]:
    """The per-call routers `make_balancer` builds (the default "least_loaded" is not one)."""
    return sorted(_ROUTERS)


def make_balancer(
    name: str,
    *,
    load: Callable[[Any], float] | None = None,
    table: ProcessTable | None = None,
    **options: Any,
) -> Any:
    """Build a per-call router by name: "locality", "least_used" or "round_robin". `load` (how used
    an instance is) goes to the routers that compare loads, `table` (the process table to keep pins
    in) to the locality router; the others ignore them. Other options go to the constructor (e.g.
    threshold=2048 for "locality"); an unknown name or option raises ValueError naming it."""
    if name not in _ROUTERS:
        raise ValueError(f"unknown load balancer {name!r}; known: {', '.join(balancer_names())}")
    cls, allowed = _ROUTERS[name]
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(
            f"load balancer {name!r}: unknown option(s) {unknown}; options are {sorted(allowed) or 'none'}"
        )
    if cls is LocalityAware:
        return cls(table=table, load=load, **options)
    if cls is LeastUsed:
        return cls(load=load)
    return cls()


__all__ = [
    "DEFAULT_BALANCER",
    "DEFAULT_THRESHOLD",
    "LeastLoaded",
    "LeastUsed",
    "LocalityAware",
    "RoundRobin",
    "balancer_names",
    "make_balancer",
]
