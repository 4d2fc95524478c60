"""The errors a query or a program call can end with."""

from __future__ import annotations

from typing import Any


class QueryError(RuntimeError):
    """A query failed. `primitive` and `engine` name where (None when it was not one primitive's
    fault); `trace` holds what ran before the failure."""

    def __init__(
        self,
        message: str,
        query_id: str,
        primitive: str | None = None,
        engine: str | None = None,
        trace: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.query_id = query_id
        self.primitive = primitive
        self.engine = engine
        self.trace = trace if trace is not None else []


class QueryUnavailable(QueryError):
    """An engine instance the query was running on went down (its process died); teola is
    restarting it, and the same query may succeed when retried shortly."""


class EngineDown(RuntimeError):
    """What in-flight work of an engine instance that went down fails with."""


class QueryCancelled(QueryError):
    """The query was cancelled with `Runtime.cancel(query_id)`."""


class QueryTimeout(QueryError):
    """The query (config "timeout") or one of its primitives (config "primitive_timeout") ran too long."""


class CallFailed(RuntimeError):
    """A program's LLM call (`Runtime.submit_call`) failed on its engine (the engine's exception
    is the cause)."""
