"""The Ray executor's "refs" data path: an intermediate output that only engine primitives read stays
in Ray's object store instead of travelling to the driver and back.

The graph scheduler marks the requests of such a producer with `KEEP` (see
`teola.runtime.dispatch_plan.remote_outputs` for which outputs qualify). Inside the actor,
`keep_results` puts the marked requests' results into the object store with one `ray.put` per batch
and returns a small `RemoteItem` per request instead; the driver stores those in the query's object
store like any value and builds the consumer's requests with them. The consumer's actor then swaps
every `RemoteItem` in its requests for the value (`resolve_inputs`, which awaits the refs: Ray does
not resolve refs nested in arguments), fetching it from the producer's node, not from the driver.

The objects are owned by the producing actor: if it dies before a consumer has read them, the
consumer's batch fails with `IntermediateLost` naming the producer, and with it only the queries
whose intermediate outputs were on that actor."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

KEEP = "keep_remote"  # request flag: this request's result may stay in the object store
# Below Ray's own inline limit for task results (100 KiB) a result rides in the actor's reply, which
# costs less than a put plus a fetch by the consumer (bench.ray_overhead); above it, it goes through
# the object store anyway, and keeping it there saves the trip to the driver and back.
MIN_REF_BYTES = 100 * 1024


class IntermediateLost(RuntimeError):
    """An intermediate output kept in the object store was lost (the actor that produced it died)."""


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
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, (list, tuple)):
        return len(value) * approx_bytes(value[0]) if value else 0
    if isinstance(value, dict):
        return sum(approx_bytes(v) for v in value.values())
    return 8


def keep_results(requests: list[dict[str, Any]], results: list[Any], source: str,
                 min_bytes: int = MIN_REF_BYTES) -> list[Any]:
    """In the actor: results of requests marked `KEEP` go into the object store (one object for
    the batch) when together they are at least `min_bytes`; they are returned as `RemoteItem`s,
    the others as they are."""
    kept = [i for i, r in enumerate(requests) if r.get(KEEP)]
    if not kept or not isinstance(results, list) or len(results) != len(requests):
        return results  # nothing to keep, or a wrong result count the driver reports
    if min_bytes > 0 and sum(approx_bytes(results[i]) for i in kept) < min_bytes:
        return results
    import ray
    ref = ray.put([results[i] for i in kept])
    out = list(results)
    for j, i in enumerate(kept):
        out[i] = RemoteItem(ref, j, source)
    return out


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
                raise IntermediateLost(f"an intermediate output produced on engine instance {refs[ref]} "
                                       f"(kept in Ray's object store) is gone: {type(value).__name__}; "
                                       "the actor that held it probably died") from None
            fetched[ref] = value
    return [{k: (fetched[v.ref][v.index] if isinstance(v, RemoteItem) else v) for k, v in r.items() if k != KEEP}
            for r in requests]


def count_remote(value: Any) -> int:
    """How many `RemoteItem`s a value holds (a list of them, or one); for tests and checks."""
    if isinstance(value, RemoteItem):
        return 1
    if isinstance(value, (list, tuple)):
        return sum(count_remote(v) for v in value)
    return 0
