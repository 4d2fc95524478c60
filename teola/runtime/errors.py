"""Query outcomes: the result object and the errors a query can end with."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Result:
    """A finished query. output: the value of the graph's output key (a dict key -> value when
    the graph has several outputs; None if skipped). trace: one dict per primitive (name, op,
    engine, status, queued/started/finished seconds since the query started, instance, batch id
    and size, engine extras such as num_cached_tokens). latency: seconds end to end."""

    output: Any
    trace: list[dict[str, Any]]
    query_id: str
    latency: float
    skipped: bool = False


class QueryError(RuntimeError):
    """A query failed. `primitive` and `engine` name where (None when it was not one primitive's
    fault); `trace` holds what ran before the failure."""

    def __init__(self, message: str, query_id: str, primitive: str | None = None, engine: str | None = None,
                 trace: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.query_id = query_id
        self.primitive = primitive
        self.engine = engine
        self.trace = trace if trace is not None else []


class QueryCancelled(QueryError):
    """The query was cancelled with `Runtime.cancel(query_id)`."""


class QueryTimeout(QueryError):
    """The query (config "timeout") or one of its primitives (config "primitive_timeout") ran too long."""

