"""The Ray executor's "refs" data path: an intermediate output that only engine primitives read stays
in Ray's object store instead of travelling to the driver and back.

The graph scheduler marks the requests of such a producer with `KEEP` (see
`teola.runtime.graph_tier.dispatch_plan.remote_outputs` for which outputs qualify). The driver runs a batch
with marked requests as an actor task with two return values (`split_results`): the other results,
which it awaits, and the kept ones, whose ref it holds without fetching them (`attach_refs` turns
each kept result into a small `RemoteItem`). The query's object store holds those like any value and
the consumer's requests are built with them. The consumer's actor swaps every `RemoteItem` in its
requests for the value (`resolve_inputs`, which awaits the refs: Ray does not resolve refs nested
in arguments), fetching it from the producer's node, not from the driver.

The driver owns the kept objects (they are its task's return values), so they outlive the producing
actor (they sit in its node's object store); if they are lost anyway (the node died), the batch
that reads them fails with `IntermediateLost` naming the producer, and with it only the queries
whose intermediate outputs were there."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

KEEP = "keep_remote"  # request flag: this request's result may stay in the object store
# Below Ray's own inline limit for task results (100 KiB) a result rides in the actor's reply, which
# costs less than a put plus a fetch by the consumer (`python -m bench ray_overhead`,
# bench/results/overheads/ray.md); above it, it goes through the object store anyway, and keeping it there
# saves the trip to the driver and back.
MIN_REF_BYTES = 100 * 1024


class IntermediateLost(RuntimeError):
    """An intermediate output kept in the object store was lost (e.g. its node died)."""


@dataclass(frozen=True, slots=True)
class RemoteItem:
    """Item `index` of the list stored under `ref` (one object per producing batch); `source`
    names the engine instance that produced it (for errors)."""

    ref: Any
    index: int
    source: str

    def __repr__(self) -> str:
        return f"RemoteItem({self.source}, item {self.index})"


def approx_bytes(value: Any) -> int:
    """A cheap size estimate: arrays by `nbytes`, texts by length, 8 bytes a number, and a list as
    its length times its first item (results and vectors hold items of one shape)."""
    n = getattr(value, "nbytes", None)
    if isinstance(n, int):
        return n
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    if isinstance(value, (list, tuple)):
        return len(value) * approx_bytes(value[0]) if value else 0
    if isinstance(value, dict):
        return sum(approx_bytes(v) for v in value.values())
    return 8


def split_results(
    requests: list[dict[str, Any]], results: list[Any], min_bytes: int = MIN_REF_BYTES
) -> tuple[tuple[list[Any], list[int]], list[Any] | None]:
    """In the actor: ((results with None for the kept ones, kept indices), kept results). Results of
    requests marked `KEEP` are kept when together they are at least `min_bytes`; the kept list is
    the actor task's second return value, which the driver holds as a ref and never fetches."""
    kept = [i for i, r in enumerate(requests) if r.get(KEEP)]
    if not kept or not isinstance(results, list) or len(results) != len(requests):
        return (results, []), None  # nothing to keep, or a wrong result count the driver reports
    if min_bytes > 0 and sum(approx_bytes(results[i]) for i in kept) < min_bytes:
        return (results, []), None
    values = [results[i] for i in kept]
    out = list(results)
    for i in kept:
        out[i] = None
    return (out, kept), values


def attach_refs(head: tuple[list[Any], list[int]], data_ref: Any, source: str) -> list[Any]:
    """In the driver: the batch's results, with a `RemoteItem` on `data_ref` for each kept one."""
    results, kept = head
    for j, i in enumerate(kept):
        results[i] = RemoteItem(data_ref, j, source)
    return results


async def resolve_inputs(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """In the actor: the requests with every `RemoteItem` field replaced by its value and the
    `KEEP` flag removed (engine adapters see plain requests). Each batch object is fetched once."""
    refs: dict[Any, str] = {}
    touched = False
    for r in requests:
        for v in r.values():
            if isinstance(v, RemoteItem):
                refs.setdefault(v.ref, v.source)
        touched = touched or KEEP in r
    if not refs and not touched:
        return requests
    fetched: dict[Any, Any] = {}
    if refs:
        order = list(refs)
        got = await asyncio.gather(*order, return_exceptions=True)
        for ref, value in zip(order, got):
            if isinstance(value, BaseException):
                raise IntermediateLost(
                    f"an intermediate output produced on engine instance {refs[ref]} "
                    f"(kept in Ray's object store) is gone: {type(value).__name__}: "
                    f"{str(value)[:300]}"
                ) from None
            fetched[ref] = value
    return [
        {k: (fetched[v.ref][v.index] if isinstance(v, RemoteItem) else v) for k, v in r.items() if k != KEEP}
        for r in requests
    ]


def count_remote(value: Any) -> int:
    """How many `RemoteItem`s a value holds (a list of them, or one); for tests and checks."""
    if isinstance(value, RemoteItem):
        return 1
    if isinstance(value, (list, tuple)):
        return sum(count_remote(v) for v in value)
    return 0
