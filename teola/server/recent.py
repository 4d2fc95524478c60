"""`RecentQueries`: the last queries the server ran (running, finished or failed), per tenant, with
what the /ui page draws of one: its trace, its e-graph's edges, the critical path and which
other queries shared its engine batches. Calls through the OpenAI-compatible door are listed too,
as one-primitive entries of kind "openai". Bounded per tenant: a tenant's oldest entries are
forgotten, so one tenant's flood never flushes another's history."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from teola.trace.timeline import batch_mates, critical_path

QUESTION_CHARS = 200


class RecentQueries:
    """The last `capacity` queries of each tenant (its oldest dropped first)."""

    def __init__(self, capacity: int = 200) -> None:
        if capacity < 1:
            raise ValueError(f"RecentQueries capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._items: dict[str, dict[str, Any]] = {}  # every tenant's entries by key
        self._order: dict[str, OrderedDict[str, None]] = {}  # per tenant: its keys, oldest first

    def _add(self, tenant: str, key: str, item: dict[str, Any]) -> None:
        self._items[key] = item
        order = self._order.setdefault(tenant, OrderedDict())
        order[key] = None
        while len(order) > self.capacity:
            del self._items[order.popitem(last=False)[0]]

    def begin(self, tenant: str, app: str, compiled: Any) -> None:
        """A query of `tenant` on `app` starts running."""
        question = compiled.inputs.get("query.question")
        egraph = compiled.egraph
        self._add(
            tenant,
            compiled.query_id,
            {
                "query_id": compiled.query_id,
                "app": app,
                "tenant": tenant,
                "status": "running",
                "started_at": time.time(),
                "latency": None,
                "error": None,
                "trace": [],
                "question": question[:QUESTION_CHARS] if isinstance(question, str) else None,
                "primitives": len(egraph),
                "graph_cache_hit": bool(compiled.cache_hit),
                "parents": {p.name: [q.name for q in egraph.parents(p)] for p in egraph.primitives},
            },
        )

    def begin_call(self, tenant: str, app: str, call_id: str, prompt: str) -> str:
        """A call through the OpenAI-compatible door starts: listed like a query of one primitive
        (kind "openai"). Returns its key (the call id; suffixed when the id was seen recently)."""
        key, n = call_id, 1
        while key in self._items:
            n += 1
            key = f"{call_id}~{n}"
        self._add(
            tenant,
            key,
            {
                "query_id": key,
                "app": app,
                "tenant": tenant,
                "status": "running",
                "kind": "openai",
                "started_at": time.time(),
                "latency": None,
                "error": None,
                "trace": [],
                "question": prompt[:QUESTION_CHARS],
                "primitives": 1,
                "graph_cache_hit": False,
                "parents": {call_id: []},
            },
        )
        return key

    def finish_call(self, key: str, entry: dict[str, Any], error: BaseException | None = None) -> None:
        """The door call `key` ended: its trace entry (times from its start; its status "ok",
        "failed" or "cancelled"), and its `error` if it has no answer."""
        item = self._items.get(key)
        if item is None:
            return
        item.update(
            status=entry.get("status", "failed" if error is not None else "ok"),
            trace=[entry],
            latency=float(entry.get("finished") or 0.0),
            error=None if error is None else f"{type(error).__name__}: {error}",
        )

    def finish(self, query_id: str, result: Any = None, error: BaseException | None = None) -> None:
        """The query ended with `result` (a Result) or failed with `error` (its trace, if any, kept)."""
        item = self._items.get(query_id)
        if item is None:
            return
        if result is not None:
            item.update(status="ok", latency=float(result.latency), trace=list(result.trace))
        else:
            item.update(
                status="failed",
                error=f"{type(error).__name__}: {error}",
                trace=list(getattr(error, "trace", None) or []),
                latency=time.time() - item["started_at"],
            )

    def listing(self, tenant: str) -> list[dict[str, Any]]:
        """`tenant`'s recent queries, newest first, without their traces."""
        keys = ("query_id", "app", "status", "started_at", "latency", "question", "primitives", "error")
        return [
            {**{k: self._items[key][k] for k in keys}, "kind": self._items[key].get("kind", "query")}
            for key in reversed(self._order.get(tenant, {}))
        ]

    def detail(self, tenant: str, query_id: str) -> dict[str, Any] | None:
        """One query of `tenant` with its timeline: trace, e-graph parents, critical path and batch
        mates (per primitive: how many requests of its batches came from other queries, and which
        of this tenant's recent queries they were). None if unknown or another tenant's."""
        item = self._items.get(query_id)
        if item is None or item["tenant"] != tenant:
            return None
        trace = item["trace"]
        mates = batch_mates(trace)
        others = self._batch_index(item["app"], tenant, query_id)
        return {
            **{k: v for k, v in item.items() if k != "tenant"},
            "critical_path": critical_path(trace, item["parents"]),
            "batch_mates": {
                t["primitive"]: {
                    "requests": mates.get(t["primitive"], 0),
                    "queries": sorted(others.get(t.get("batch_id"), ())),
                }
                for t in trace
                if t.get("batch_id") is not None
            },
        }

    def _batch_index(self, app: str, tenant: str, query_id: str) -> dict[str, set[str]]:
        """batch id -> this tenant's other recent queries on `app` with a primitive in that batch."""
        out: dict[str, set[str]] = {}
        for it in (self._items[key] for key in self._order.get(tenant, {})):
            if it["app"] != app or it["query_id"] == query_id:
                continue
            for t in it["trace"]:
                if t.get("batch_id") is not None:
                    out.setdefault(t["batch_id"], set()).add(it["query_id"])
        return out
