"""Passes by name, in pipeline order. Custom passes register with `register_pass`."""

from __future__ import annotations

from collections.abc import Callable

from teola.passes.component_order import component_order
from teola.passes.decode_pipelining import decode_pipelining
from teola.passes.module_chain import module_chain
from teola.passes.prefill_split import prefill_split
from teola.passes.prune_covered_searches import prune_covered_searches
from teola.passes.prune_dependencies import prune_dependencies
from teola.passes.result import PassResult
from teola.passes.speculative_call import speculative_call
from teola.passes.speculative_search import speculative_search
from teola.passes.stage_decomposition import stage_decomposition

PassFn = Callable[..., PassResult]

# Order matters: covered searches go first (they drop whole primitives, whose edges go with them);
# a speculative search moves its guard to its readers before prefill split copies their guards,
# and a call reading the search then moves that guard on to its own readers;
# pruning frees branches before stages and prefixes are computed from the edges
# that remain; decode pipelining runs last so it splits the readers that stage decomposition made.
_PASSES: dict[str, PassFn] = {
    "prune_covered_searches": prune_covered_searches,
    "speculative_search": speculative_search,
    "speculative_call": speculative_call,
    "prune_dependencies": prune_dependencies,
    "stage_decomposition": stage_decomposition,
    "prefill_split": prefill_split,
    "decode_pipelining": decode_pipelining,
    "module_chain": module_chain,
    "component_order": component_order,
}
# Passes that run only when a query asks for them (baselines, experiments).
_OFF_BY_DEFAULT: set[str] = {"module_chain", "component_order"}


def register_pass(name: str, fn: PassFn, *, before: str | None = None, default: bool = True) -> None:
    """Add a pass `fn(graph, **options) -> PassResult` under `name`, at the end of the pipeline or
    before the named pass. It runs by default (unless default=False); a query turns it on or off
    with `{"passes": {name: true/false}}` or gives it options with `{"passes": {name: {...}}}`."""
    if not isinstance(name, str) or not name or not callable(fn):
        raise ValueError("register_pass(name, fn): name must be a non-empty string and fn callable")
    if before is not None and before not in _PASSES:
        raise ValueError(f"register_pass: no pass named {before!r} to insert before; passes: {pass_names()}")
    items = [(k, v) for k, v in _PASSES.items() if k != name]
    idx = len(items) if before is None else [k for k, _ in items].index(before)
    items.insert(idx, (name, fn))
    _PASSES.clear()
    _PASSES.update(items)
    if default:
        _OFF_BY_DEFAULT.discard(name)
    else:
        _OFF_BY_DEFAULT.add(name)


def unregister_pass(name: str) -> None:
    _PASSES.pop(name, None)
    _OFF_BY_DEFAULT.discard(name)


def enabled_by_default(name: str) -> bool:
    return name not in _OFF_BY_DEFAULT


def pass_names() -> list[str]:
    return list(_PASSES)


def get_pass(name: str) -> PassFn:
    if name not in _PASSES:
        raise ValueError(f"unknown pass {name!r}; passes: {', '.join(pass_names())}")
    return _PASSES[name]
