"""`QueryContext`: the narrow view of the runtime a query in flight (`QueryRun`) works with:
where to queue and withdraw work, which engines are LLMs, the counters, and whom to tell when
the query ends. The runtime builds one; tests can build one over fake schedulers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from teola.runtime.errors import QueryError
from teola.runtime.metrics import Metrics
from teola.scheduling.base import Pending


@dataclass(slots=True, frozen=True, kw_only=True)
class QueryContext:
    """submit(engine, entry) queues an entry on an engine scheduler; withdraw(engine, entry) drops
    it if still queued; llm_engines: the LLM engines (cache salts and speculation tags go to their requests);
    prescheduling: the default for fusing a prefill into its decode; ended(run, error or None, latency) is
    called once per query; cleanup(run) drops a failed query's namespace in the background; remote_data:
    the executor keeps intermediate outputs that only engines read on its side (Ray "refs" path);
    tool_done(args, requests, trace): a tool primitive with these args and requests finished, as its
    trace row says (the tool calls of a pausing LLM call teach its engine's policy their durations)."""

    submit: Callable[[str, Pending], None]
    withdraw: Callable[[str, Pending], bool]
    llm_engines: frozenset[str]
    metrics: Metrics
    prescheduling: bool
    ended: Callable[[Any, QueryError | None, float], None]  # the run: a QueryState
    cleanup: Callable[[Any], None]
    remote_data: bool = False
    tool_done: Callable[[dict[str, Any], Sequence[Mapping[str, Any]], Mapping[str, Any]], None] = lambda *_: (
        None
    )
