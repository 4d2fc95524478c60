"""`Result`: what a finished query returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from teola.runtime.trace_row import TraceRow


@dataclass(slots=True)
class Result:
    """A finished query. output: the value of the graph's output key (a dict key -> value when
    the graph has several outputs; None if skipped). trace: one dict per primitive (name, op,
    engine, status (a `TraceStatus`, equal to its string: "ok"; "skipped": behind a condition that
    said no; "discarded": a speculative search or LLM call its condition made useless),
    queued/started/finished seconds since the query started, instance, batch id and size, engine extras such
    as num_cached_tokens). latency: seconds end to end. values: the object-store values the query's config
    asked for (`"return_values": ["rerank.context"]`), e.g. the chunks an answer was synthesized from; keys
    the query never wrote are absent."""

    output: Any
    trace: list[TraceRow]
    query_id: str
    latency: float
    skipped: bool = False
    values: dict[str, Any] = field(default_factory=dict)
