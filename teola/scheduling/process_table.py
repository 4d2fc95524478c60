"""The process table (Autellix §4.2.1): what the scheduler and the load balancer know about each
running program (an agentic session, or one teola query).

Per program: attained service and queueing (waiting) time of its completed calls, the engine instance it is
pinned to, its active LLM calls (arrival, parents, wait, service, the critical-path priority each inherited),
the critical-path end of its completed calls (ATLAS looks up a call's declared parents there), and the
times of its last call arrival and last call completion. `end_program(pid)` removes the entry.

Service is a plain number in whatever unit the caller charges (decoded tokens or engine seconds;
the policies document which one they use). Execution time (`run`, seconds on the engine) is kept
beside it, so the anti-starvation ratio compares waiting seconds with running seconds whatever the
service unit (Autellix's W / T). Two aggregates of service are kept per program:
  - `service`: the sum of its completed calls' service (PLAS priority, Autellix eq. 1);
  - `critical_path`: the longest observed critical path, max over completed calls of
    (the call's inherited priority + its service) (ATLAS priority, eq. 2 / Algorithm 1 line 4).

Concurrency: the table is plain dicts with no locks. It is meant to be used from one asyncio event
loop (the runtime's), where every method runs to completion without interleaving; it is not safe
to mutate from several OS threads at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class CallRecord:
    """One active LLM call of a program. `priority` is the critical-path value it inherited when it
    arrived (ATLAS); `wait` and `service` accumulate while it is active."""

    call_id: str
    arrival: float
    parents: tuple[str, ...] = ()
    priority: float = 0.0
    wait: float = 0.0
    service: float = 0.0
    run: float = 0.0
    started: float | None = None


@dataclass(slots=True)
class ProgramEntry:
    """One program's row in the process table (see the module docstring for the fields' meaning)."""

    pid: str
    started: float
    service: float = 0.0
    critical_path: float = 0.0
    wait: float = 0.0
    run: float = 0.0
    engine: Any = None
    calls: dict[str, CallRecord] = field(default_factory=dict)
    paths: dict[str, float] = field(default_factory=dict)
    completed: int = 0
    last_arrival: float | None = None
    last_completion: float | None = None


class ProcessTable:
    """Program id -> `ProgramEntry`. Entries appear on first use (`start_program` or the first
    call) and disappear with `end_program`. Single event loop only (no locks; see module doc)."""

    def __init__(self) -> None:
        self._programs: dict[str, ProgramEntry] = {}

    # ---- programs -----------------------------------------------------------------------------
    def start_program(self, pid: str, now: float = 0.0) -> ProgramEntry:
        """The entry of `pid`, created if new."""
        if not isinstance(pid, str) or not pid:
            raise ValueError(f"program id must be a non-empty string, got {pid!r}")
        entry = self._programs.get(pid)
        if entry is None:
            entry = self._programs[pid] = ProgramEntry(pid, now)
        return entry

    def end_program(self, pid: str) -> ProgramEntry | None:
        """Remove `pid` (its calls, service and engine pin); returns the removed entry or None."""
        return self._programs.pop(pid, None)

    def get(self, pid: str) -> ProgramEntry | None:
        return self._programs.get(pid)

    def __contains__(self, pid: object) -> bool:
        return pid in self._programs

    def __len__(self) -> int:
        return len(self._programs)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._programs))

    # ---- calls --------------------------------------------------------------------------------
    def call_arrived(
        self, pid: str, call_id: str, now: float, parents: Iterable[str] | None = None
    ) -> CallRecord:
        """Record a new LLM call (idempotent: a known active call is returned unchanged).

        Its inherited ATLAS priority (eq. 2): with `parents` None (unknown, e.g. an e-graph call),
        the program's longest critical path so far (the paper's per-program scalar); with `()`
        (a declared root), 0; otherwise max over the completed parents of (their priority + their
        service), falling back to the program's critical path if no parent has completed."""
        entry = self.start_program(pid, now)
        rec = entry.calls.get(call_id)
        if rec is not None:
            return rec
        if parents is None:
            declared: tuple[str, ...] = ()
            prio = entry.critical_path
        else:
            declared = tuple(parents)
            known = [entry.paths[p] for p in declared if p in entry.paths]
            prio = max(known) if known else (0.0 if not declared else entry.critical_path)
        rec = entry.calls[call_id] = CallRecord(call_id, now, declared, prio)
        entry.last_arrival = now
        return rec

    def call(self, pid: str, call_id: str) -> CallRecord | None:
        entry = self._programs.get(pid)
        return None if entry is None else entry.calls.get(call_id)

    def call_started(self, pid: str, call_id: str, now: float) -> None:
        """The call left the queue for an engine: its queueing time since arrival is added to its
        waiting time (once, on its first start). Policies that charge waiting time step by step
        use `add_wait` instead."""
        rec = self._require(pid, call_id)
        if rec.started is None:
            rec.started = now
            rec.wait += max(0.0, now - rec.arrival)

    def add_wait(self, pid: str, call_id: str, amount: float) -> None:
        """Charge queueing time to an active call; like service, it reaches the program's total
        when the call completes."""
        if amount < 0:
            raise ValueError(f"waiting time must be >= 0, got {amount!r}")
        self._require(pid, call_id).wait += amount

    def add_service(self, pid: str, call_id: str, amount: float, seconds: float | None = None) -> None:
        """Charge service (tokens or seconds) to an active call, and `seconds` of execution time
        (None: `amount` is itself seconds); the program's aggregates change only when the call
        completes."""
        if amount < 0 or (seconds is not None and seconds < 0):
            raise ValueError(f"service and seconds must be >= 0, got {amount!r}, {seconds!r}")
        rec = self._require(pid, call_id)
        rec.service += amount
        rec.run += amount if seconds is None else seconds

    def call_finished(
        self, pid: str, call_id: str, now: float, service: float | None = None
    ) -> CallRecord | None:
        """The call completed: update the program's service and waiting sums, its critical path (max with the
        call's priority + service) and last completion; the call leaves the active set. `service`,
        if given, is added to what was charged with `add_service`. Unknown calls return None
        (the program may already have ended)."""
        entry = self._programs.get(pid)
        if entry is None:
            return None
        rec = entry.calls.pop(call_id, None)
        if rec is None:
            return None
        if service is not None:
            if service < 0:
                raise ValueError(f"service must be >= 0, got {service!r}")
            rec.service += service
            rec.run += service  # given without its seconds: taken as seconds (see add_service)
        entry.service += rec.service
        entry.wait += rec.wait
        entry.run += rec.run
        end = rec.priority + rec.service
        entry.paths[call_id] = end
        entry.critical_path = max(entry.critical_path, end)
        entry.completed += 1
        entry.last_completion = now
        return rec

    def call_dropped(self, pid: str, call_id: str) -> None:
        """Forget an active call that will never complete (its query failed or was cancelled)."""
        entry = self._programs.get(pid)
        if entry is not None:
            entry.calls.pop(call_id, None)

    # ---- placement ----------------------------------------------------------------------------
    def assign_engine(self, pid: str, engine: Any, now: float = 0.0) -> None:
        """Pin `pid` to an engine instance (Algorithm 2 line 10)."""
        self.start_program(pid, now).engine = engine

    def engine_of(self, pid: str) -> Any:
        entry = self._programs.get(pid)
        return None if entry is None else entry.engine

    def _require(self, pid: str, call_id: str) -> CallRecord:
        entry = self._programs.get(pid)
        rec = None if entry is None else entry.calls.get(call_id)
        if rec is None:
            raise KeyError(
                f"process table has no active call {call_id!r} of program {pid!r}; "
                "record it with call_arrived() first"
            )
        return rec
