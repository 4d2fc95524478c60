"""The multi-level feedback queues of program-aware LLM scheduling (Autellix §4.2, Algorithm 1):
`ProgramQueues` is the shared core of the "mlfq", "plas" and "atlas" policies. It keeps K queues
Q_0..Q_{K-1} (Q_0 runs first). Queue i has the time quantum `base_quantum * growth**i` and covers
the priority range [lo_i, lo_i + quantum_i) with lo_0 = 0 and the last queue open-ended, so a
call that exhausts its quantum lands exactly where its attained service would place it.

  - A call arrives: its program priority p(c) is computed by the policy's `priority(table, pid,
    inherited)` function (mlfq.py: 0; plas.py: the program's attained service; atlas.py: the
    call's inherited critical path) and discretized into the queue whose range holds it
    (Algorithm 1 lines 11-13).
  - A running call is charged service; when it exhausts its queue's quantum it is demoted one
    queue (lines 20-23), possibly several times for a large charge.
  - Anti-starvation (lines 24-30): a waiting call of program P is promoted to Q_0 when
    (W_P + W_c) / (T_P + T_c) >= beta, where W_P, T_P are the program's waiting and execution
    seconds over its completed calls (process table) and W_c, T_c the call's own since its last
    promotion; promotion resets only W_c and T_c. T is execution time in seconds whatever unit
    the priority's service is charged in (`charge(..., seconds=)`), so beta is a plain ratio.
  - Within a queue calls run first-come first-served; a demoted or promoted call joins the tail
    of its new queue (Algorithm 1's `append`).
  - `promotion`: "preempt" (default, Algorithm 1) ranks a promoted call in Q_0 for admission and
    for preemption alike; "admit" (a named deviation, docs/program_scheduling.md) ranks it in Q_0
    for admission but lets it preempt a running call only from the queue it was promoted from,
    until it runs again (`preempt_level`).
  - Multi-step scheduling: the ranking is recomputed only when the set of queued calls changes
    or every `rerank_every` scheduling steps, so priorities do not churn (and preempt) each step.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from teola.scheduling.process_table import CallRecord, ProcessTable

PROMOTIONS = ("preempt", "admit")

# p(c) of a new call: (process table, program id, inherited critical path) -> priority >= 0
Priority = Callable[[ProcessTable, str, float], float]


class Levels:
    """The K queues' quanta and priority ranges (see the module docstring)."""

    __slots__ = ("quanta", "lows")

    def __init__(self, num_queues: int = 8, base_quantum: float = 32.0, growth: float = 2.0) -> None:
        if not isinstance(num_queues, int) or num_queues < 1:
            raise ValueError(f"mlfq: num_queues must be an int >= 1, got {num_queues!r}")
        if not base_quantum > 0:
            raise ValueError(f"mlfq: base_quantum must be > 0, got {base_quantum!r}")
        if not growth >= 1:
            raise ValueError(f"mlfq: growth must be >= 1 (quanta grow from queue to queue), got {growth!r}")
        self.quanta = [base_quantum * growth**i for i in range(num_queues)]
        self.quanta[-1] = math.inf
        lows, lo = [], 0.0
        for q in self.quanta:
            lows.append(lo)
            lo += q
        self.lows = lows

    def __len__(self) -> int:
        return len(self.quanta)

    def level_of(self, priority: float) -> int:
        """The queue whose range [lo_i, hi_i) holds `priority`."""
        if priority < 0:
            raise ValueError(f"priority must be >= 0, got {priority!r}")
        lvl = 0
        for i, lo in enumerate(self.lows):
            if priority >= lo:
                lvl = i
            else:
                break
        return lvl


@dataclass(slots=True, eq=False)
class CallState:
    """One call in the queues. `used`: service charged in the current queue; `wait` / `run`: the
    call's own waiting and execution seconds since arrival or its last anti-starvation promotion
    (W_c, T_c); `service`: its service since then, in the priority's unit."""

    pid: str
    call_id: str
    level: int
    seq: int
    used: float = 0.0
    wait: float = 0.0
    service: float = 0.0
    run: float = 0.0
    promotions: int = 0
    demotions: int = 0
    # the queue the call was in when anti-starvation promoted it, until it runs again: with
    # promotion="admit" it preempts running calls only from there (see ProgramQueues)
    natural: int | None = None


class ProgramQueues:
    """The MLFQ state machine over calls identified by any hashable key (the runtime uses the
    Pending entry itself; simulators use their own ids). Pure bookkeeping, no I/O, no clock."""

    def __init__(
        self,
        priority: Priority,
        table: ProcessTable | None = None,
        num_queues: int = 8,
        base_quantum: float = 32.0,
        growth: float = 2.0,
        beta: float | None = 8.0,
        rerank_every: int = 4,
        promotion: str = "preempt",
    ) -> None:
        if not callable(priority):
            raise TypeError(
                f"ProgramQueues: priority must be a function (table, pid, inherited) -> float, "
                f"got {priority!r}"
            )
        if beta is not None and not beta > 0:
            raise ValueError(
                f"mlfq: beta (anti-starvation wait/service ratio) must be > 0 or None, got {beta!r}"
            )
        if not isinstance(rerank_every, int) or rerank_every < 1:
            raise ValueError(f"mlfq: rerank_every must be an int >= 1, got {rerank_every!r}")
        if promotion not in PROMOTIONS:
            raise ValueError(f"mlfq: promotion must be one of {PROMOTIONS}, got {promotion!r}")
        self.promotion = promotion
        self.priority = priority
        self.table = table if table is not None else ProcessTable()
        self.levels = Levels(num_queues, base_quantum, growth)
        self.growth = growth
        self.beta = beta
        self.rerank_every = rerank_every
        self.calls: dict[Hashable, CallState] = {}
        self._seq = itertools.count()
        self._order: list[Hashable] = []
        self._members: frozenset = frozenset()
        self._since = 0
        self.reranks = 0
        self.promoted = 0  # anti-starvation promotions of any call, for studies

    # ---- lifecycle ----------------------------------------------------------------------------
    def admit(
        self, key: Hashable, pid: str, call_id: str, now: float, parents: Iterable[str] | None = None
    ) -> CallState:
        """A call arrives (idempotent per key): record it in the process table and place it in the
        queue its program priority falls into."""
        st = self.calls.get(key)
        if st is not None:
            return st
        rec = self.table.call_arrived(pid, call_id, now, parents)
        st = self.calls[key] = CallState(
            pid, call_id, self.levels.level_of(self.program_priority(pid, rec.priority)), next(self._seq)
        )
        return st

    def program_priority(self, pid: str, inherited: float = 0.0) -> float:
        """p(c) for a new call of `pid` under this queue's priority function."""
        return self.priority(self.table, pid, inherited)

    def charge(self, key: Hashable, service: float, seconds: float | None = None) -> int:
        """A running call received `service` in `seconds` of execution time (None: the service is
        itself seconds); demote it for each exhausted quantum. Returns its level."""
        if service < 0 or (seconds is not None and seconds < 0):
            raise ValueError(f"service and seconds must be >= 0, got {service!r}, {seconds!r}")
        st = self._state(key)
        st.natural = None
        st.service += service
        st.run += service if seconds is None else seconds
        st.used += service
        self.table.add_service(st.pid, st.call_id, service, seconds)
        while st.level < len(self.levels) - 1 and st.used >= self.levels.quanta[st.level]:
            st.used -= self.levels.quanta[st.level]
            st.level += 1
            st.demotions += 1
            st.seq = next(self._seq)
        return st.level

    def wait(self, key: Hashable, amount: float) -> None:
        """A call spent `amount` seconds queued (not running)."""
        st = self._state(key)
        st.wait += amount
        self.table.add_wait(st.pid, st.call_id, amount)

    def starving(self, key: Hashable) -> bool:
        """Promote `key` to Q_0 if (W_P + W_c) / (T_P + T_c) >= beta (waiting over execution
        seconds); True if it was promoted. A ratio with no execution at all yet counts as starving
        once any time was waited."""
        if self.beta is None:
            return False
        st = self._state(key)
        if st.level == 0:
            return False
        entry = self.table.get(st.pid)
        w = st.wait + (entry.wait if entry is not None else 0.0)
        t = st.run + (entry.run if entry is not None else 0.0)
        if w <= 0 or (t > 0 and w / t < self.beta):
            return False
        if st.natural is None:
            st.natural = st.level
        st.level = 0
        st.seq = next(self._seq)
        st.used = 0.0
        st.wait = 0.0
        st.service = 0.0
        st.run = 0.0
        st.promotions += 1
        self.promoted += 1
        return True

    def finish(self, key: Hashable, now: float, service: float | None = None) -> CallRecord | None:
        """The call completed: its program's aggregates are updated in the process table. Returns
        its process-table record (its whole service), or None for an unknown call."""
        st = self.calls.pop(key, None)
        if st is None:
            return None
        return self.table.call_finished(st.pid, st.call_id, now, service)

    def rescale(self, base_quantum: float) -> None:
        """New quanta (base_quantum * growth**i); calls keep their queue and the service they used
        in it, new calls are placed by the new ranges (teola.scheduling.program.quanta)."""
        self.levels = Levels(len(self.levels), base_quantum, self.growth)

    def drop(self, key: Hashable) -> None:
        """Forget a call that will not complete (its query failed or was cancelled)."""
        st = self.calls.pop(key, None)
        if st is not None:
            self.table.call_dropped(st.pid, st.call_id)

    def end_program(self, pid: str) -> None:
        """The program ended: drop its calls and its process-table entry."""
        for key in [k for k, st in self.calls.items() if st.pid == pid]:
            del self.calls[key]
        self.table.end_program(pid)

    # ---- ranking ------------------------------------------------------------------------------
    def rank(self, keys: Sequence[Hashable]) -> list[Hashable]:
        """`keys` best first: by queue, then arrival. Re-sorted only when the set of keys changed
        or every `rerank_every` calls (multi-step scheduling); otherwise the last order is reused."""
        members = frozenset(keys)
        self._since += 1
        if members != self._members or self._since >= self.rerank_every:
            calls = self.calls
            self._order = sorted(keys, key=lambda k: (calls[k].level, calls[k].seq))
            self._members = members
            self._since = 0
            self.reranks += 1
        return list(self._order)

    def level(self, key: Hashable) -> int:
        return self._state(key).level

    def preempt_level(self, key: Hashable) -> int:
        """The queue a waiting call preempts from: its own, except with promotion="admit" for a
        call promoted since it last ran (the queue it was promoted from)."""
        st = self._state(key)
        if self.promotion == "admit" and st.natural is not None:
            return st.natural
        return st.level

    def _state(self, key: Hashable) -> CallState:
        st = self.calls.get(key)
        if st is None:
            raise KeyError(f"call {key!r} is not in the queues; admit() it first")
        return st
