"""`Work`: what an engine scheduler reports back to for each queued entry. The graph scheduler's
dispatches (`query_work.DispatchWork`) and single program calls (`call_work.CallWork`) both
implement it, so the engine scheduler knows nothing about who submitted the entry."""

from __future__ import annotations

from typing import Any, Protocol

from teola.runtime.executors.executor import Instance


class Work(Protocol):
    """Callbacks of one queued entry, all called on the runtime's event loop; `t` is loop time.

    A batch holding some of the entry's requests calls `started` once when it is dispatched, then
    either `results` (plain batches: the results of requests [start, start + len(results))) or,
    for streaming decodes, `item` per streamed item and `final` per request; `failed` if the batch
    failed for this entry. Requests that asked for their text as it decodes ("stream_text") also
    get `delta` per decoded piece before their results. A preemptible call (engine_tier.preemption)
    that is preempted calls `requeued` instead of its results: that run ended without any, and the
    entry waits in its queue to start again."""

    def started(self, inst: Instance, batch_id: str, batch_size: int, t: float) -> None: ...

    def results(self, start: int, results: list[Any], t: float) -> None: ...

    def item(self, text: str, t: float) -> None: ...

    def final(self, result: Any, t: float) -> None: ...

    def delta(self, text: str, t: float) -> None: ...

    def failed(self, exc: BaseException, inst: Instance) -> None: ...

    def requeued(self, t: float) -> None: ...
