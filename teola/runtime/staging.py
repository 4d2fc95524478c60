"""Atomic documents in a kept namespace: the runtime's side of staged ingestion.

A query whose config names a namespace keeps its documents after it ends. Its ingestion may be
several batches (stage decomposition), each a transaction of its own in the vector store, so a
process killed half-way would leave half a document that later queries retrieve from. Instead, on
every vector store whose adapter can publish (`publish_namespace`), the query ingests under its
staging namespace (engines.requests.staging_namespace(query id)) and its own searches read the kept
namespace plus that one (teola.runtime.requests, value "sys.staging"). Once the query has succeeded
the runtime asks one instance of each such store to publish: a transaction that moves the staged
rows into the kept namespace, checking their count against the ingestion requests the query sent.
A failed query's staged rows are dropped instead (`drop_namespace` of the staging namespace). An
engine whose adapter cannot publish gets direct writes into the kept namespace, logged once.
The pure parts are here; teola.runtime.namespaces calls the engines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from engines.requests import staging_namespace
from teola.ir.ops import PrimOp
from teola.runtime.trace_status import TraceStatus


@dataclass(slots=True, frozen=True)
class Staging:
    """Where one query's documents wait: `name` on `engines`, until published into `namespace`."""

    query_id: str
    namespace: str
    name: str
    engines: tuple[str, ...]

    def by_engine(self) -> dict[str, str]:
        """The object-store value "sys.staging": engine -> staging namespace."""
        return {e: self.name for e in self.engines}


def plan_staging(
    query_id: str, namespace: Any, ingest_engines: Iterable[str], can_publish: Callable[[str], bool]
) -> tuple[Staging | None, list[str]]:
    """The staging of a query that keeps its documents in `namespace` (config "namespace"; None:
    a namespace generated for the query, dropped at its end, needs none), and the engines it
    ingests into that cannot publish (they get direct writes)."""
    if namespace is None:
        return None, []
    engines = sorted(ingest_engines)
    staged = tuple(e for e in engines if can_publish(e))
    direct = [e for e in engines if e not in staged]
    if not staged:
        return None, direct
    return Staging(query_id, namespace, staging_namespace(query_id), staged), direct


def staged_rows(trace: Iterable[dict[str, Any]], engine: str) -> int:
    """Rows a query staged on `engine`: the requests of its finished ingestion primitives there
    (one row each)."""
    return sum(
        t["requests"]
        for t in trace
        if t["engine"] == engine and t["op"] == PrimOp.INGESTION.value and t["status"] == TraceStatus.OK
    )
