"""A finished query's timeline from its trace: each primitive's queued/running interval and the
critical path (the chain of primitives that set the query's latency). Pure functions over trace
dicts (`Result.trace`); the terminal Gantt, the /ui page and the OpenTelemetry spans read them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

EPS = 1e-6


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def interval(entry: Mapping[str, Any]) -> tuple[float, float, float] | None:
    """(queued, started, finished) seconds since the query started, or None if it never ran.
    A primitive that never started (dropped) has no interval."""
    q, s, f = (_num(entry.get(k)) for k in ("queued", "started", "finished"))
    if q is None or s is None or f is None:
        return None
    return q, max(q, s), max(s, f)


def critical_path(
    trace: Sequence[Mapping[str, Any]], parents: Mapping[str, Sequence[str]] | None = None
) -> list[str]:
    """Names of the primitives on the critical path, first to last.

    Starting from the primitive that finished last (on a tie, a decode rather than the prefill fused
    into it, then the shallowest), step to the prefill fused into it if there is one (the runtime
    records it with `fused_into`: the pair ran as one engine request, dispatched when the last input
    of either was ready, so the path goes on through the prefill's inputs), else to the predecessor
    that finished last before it was queued (a primitive is dispatched when its last input is
    ready), or else to one dispatched together with it (a streamed group). `parents` (primitive
    name -> parent names, from the e-graph) restricts the predecessors; without it any primitive
    counts."""
    spans = {str(e.get("primitive")): iv for e in trace if (iv := interval(e)) is not None}
    depth = {str(e.get("primitive")): int(e.get("depth") or 0) for e in trace}
    fused = {str(e.get("primitive")) for e in trace if e.get("fused_into")}
    if not spans:
        return []

    def latest(names: Sequence[str]) -> str:
        return max(names, key=lambda n: (spans[n][2], n not in fused, -depth.get(n, 0), n))

    current = latest(list(spans))
    path = [current]
    seen = {current}
    while True:
        queued = spans[current][0]
        options = [
            n
            for n in (parents.get(current, ()) if parents is not None else spans)
            if n in spans and n not in seen
        ]
        together = [n for n in options if abs(spans[n][0] - queued) <= EPS]
        before = [n for n in options if spans[n][2] <= queued + EPS]
        prefill = [n for n in together if n in fused]
        if not before and not together:
            break
        current = latest(prefill or before or together)
        path.append(current)
        seen.add(current)
    path.reverse()
    return path


def path_times(trace: Sequence[Mapping[str, Any]], path: Sequence[str]) -> dict[str, float]:
    """Where the query's time went along `path` (critical_path's names, first to last), in seconds:
    "gap" before each primitive was queued (scheduling, communication), "queued" in an engine queue,
    "running" on its engine. Each hop is clipped to the time after the one before it on the path
    finished, so the hops of one dispatch (a fused prefill and its decode, a streamed group) count
    once; the first hop starts at the query's start (0)."""
    spans = {str(e.get("primitive")): iv for e in trace if (iv := interval(e)) is not None}
    out = {"gap": 0.0, "queued": 0.0, "running": 0.0}
    if not path:
        return out
    end = spans[path[-1]][2]
    for k in range(len(path) - 1, -1, -1):
        q, s, f = spans[path[k]]
        lo = min(spans[path[k - 1]][2], end) if k else 0.0
        out["running"] += max(0.0, end - max(s, lo))
        out["queued"] += max(0.0, min(s, end) - max(q, lo))
        out["gap"] += max(0.0, min(q, end) - lo)
        end = lo
    return out


def batch_mates(trace: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """For each batched primitive of `trace`, how many requests of its engine batch came from other
    queries: the batch size minus the requests this query put in that batch (same batch id)."""
    per_dispatch: dict[tuple[str, Any], int] = {}  # members of one dispatch share its requests
    for e in trace:
        if e.get("batch_id") is not None:
            key = (e["batch_id"], e.get("queued"))
            per_dispatch[key] = max(per_dispatch.get(key, 0), int(e.get("requests") or 0))
    own: dict[str, int] = {}
    for (bid, _), n in per_dispatch.items():
        own[bid] = own.get(bid, 0) + n
    out = {}
    for e in trace:
        batch = e.get("batch_id")
        if batch is not None and e.get("batch_size") is not None:
            out[str(e.get("primitive"))] = max(0, int(e["batch_size"]) - own.get(batch, 0))
    return out
