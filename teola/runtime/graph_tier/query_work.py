"""`DispatchWork`: one dispatch of a query to an engine scheduler (the `Work` of the graph
scheduler's entries). Its callbacks move the query's state in `QueryRun`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from teola.runtime.errors import EngineDown, QueryError, QueryUnavailable
from teola.runtime.executors.executor import Instance
from teola.runtime.executors.ray_data import IntermediateLost
from teola.runtime.graph_tier.dispatch_kind import DispatchKind
from teola.runtime.graph_tier.query_state import QueryState
from teola.runtime.graph_tier.speculation import defer, discarded, hold, undecided
from teola.scheduling.base import Pending


class DispatchWork:
    """One dispatch to an engine scheduler of a `DispatchKind`: a primitive, a prefill fused with its
    decode, or a Partial Decoding group served by one streaming request (optionally fused with the
    prefill before it: `prefill` is then its index)."""

    __slots__ = (
        "run",
        "kind",
        "idx",
        "members",
        "prefill",
        "requests",
        "res",
        "done",
        "entry",
        "timer",
        "items",
        "extra_items",
    )

    def __init__(
        self,
        *,
        run: QueryState,
        kind: DispatchKind,
        idx: int,
        requests: list[Mapping[str, Any]],
        members: tuple[int, ...] = (),
        prefill: int | None = None,
    ) -> None:
        self.run = run
        self.kind = kind
        self.idx = idx
        self.members = members
        self.prefill = prefill
        self.requests = requests
        self.res: list[Any] = [None] * len(requests)
        self.done = 0
        self.entry: Pending | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.items = 0
        self.extra_items = 0

    # ---- callbacks from the engine scheduler ---------------------------------------------------
    def started(self, inst: Instance, batch_id: str, batch_size: int, t: float) -> None:
        run = self.run
        run.inflight += 1
        if run.dead:
            return
        rel = t - run.t0
        pause = self.applied_pause()
        for i in self.traced():
            tr = run.trace[i]
            if tr["started"] is None:
                tr.update(
                    {"started": rel, "instance": inst.name, "batch_id": batch_id, "batch_size": batch_size}
                )
                if pause is not None and i == self.idx:
                    tr["pause_kv"] = pause
                run.emit_primitive(tr)
            tr["batches"] += 1

    def applied_pause(self) -> str | None:
        """The handling a pausing segment's pause got (its dispatch record's, "auto" resolved when it
        was queued); None for everything else."""
        records = self.entry.records if self.entry is not None else ()
        return records[0].pause_kv if len(records) == 1 else None

    def _landed(self) -> bool:
        """A batch holding this work came back: False if the query already ended (its leftovers
        are only cleaned up)."""
        run = self.run
        run.inflight -= 1
        if run.dead:
            run.maybe_cleanup()
            return False
        return True

    def results(self, start: int, results: list[Any], t: float) -> None:
        if not self._landed() or discarded(self.run, self.idx):
            return
        run = self.run
        self.res[start : start + len(results)] = results
        self.done += len(results)
        if self.done == len(self.requests):
            run.guard(run.work_done, self, t)

    def failed(self, exc: BaseException, inst: Instance) -> None:
        if not self._landed() or discarded(self.run, self.idx):
            return
        run = self.run
        p = run.plan.prims[self.idx]
        kind = QueryUnavailable if isinstance(exc, (EngineDown, IntermediateLost)) else QueryError
        err = kind(
            f"primitive {p.name!r} ({p.op.value}) failed on engine {p.engine!r} "
            f"(instance {inst.name}): {type(exc).__name__}: {exc}",
            run.qid,
            p.name,
            p.engine,
        )
        if undecided(run, self.idx):
            run.close_work(self)
            defer(run, self.idx, err, exc)
            return
        run.fail(err, exc)

    def requeued(self, t: float) -> None:
        """A run of this work's preemptible call was preempted: it is off the engine until it starts
        again (each run counted as a start), so it is no longer in flight."""
        self._landed()

    def item(self, text: str, t: float) -> None:
        if not self.run.dead:
            self.run.guard(self.run.stream_item, self, text, t)

    def final(self, result: Any, t: float) -> None:
        if self._landed():
            self.run.guard(self.run.stream_final, self, result, t)

    def delta(self, text: str, t: float) -> None:
        run = self.run
        if not run.dead and run.on_event is not None:
            if undecided(run, self.idx):
                hold(run, self.idx, text)
                return
            run.emit({"event": "token", "primitive": run.plan.prims[self.idx].name, "text": text})

    def traced(self) -> tuple[int, ...]:
        if self.kind is DispatchKind.PRIM:
            return (self.idx,)
        return ((self.prefill,) if self.prefill is not None else ()) + self.members
