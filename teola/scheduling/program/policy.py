"""`ProgramPolicy`: the engine-scheduler side of program-aware LLM scheduling, over the queues of
`program_queues.py`. The "mlfq", "plas" and "atlas" policies are this class with their own
priority function.

Service: a number charged per call, in the unit chosen by `service`; it sets the priorities and
the quanta:
  "seconds" (default) executor time (Autellix's "model execution time"): the seconds a call spent
            in the engine's running batch, from its results' "executor_s" (the simulated engine
            and vLLM report it; vLLM not for a request it preempted itself); time queued in teola
            or in the engine is charged as waiting. A run without it is charged its wall time on
            the engine, queue included (the named fallback `wall-time-service`,
            docs/program_scheduling.md); `charged_from` counts the runs charged either way;
  "tokens"  decoded tokens: what the engine reports ("num_output_tokens"), else each finished
            request's `max_tokens` (an upper bound; 0 for prefill-only requests). A named deviation
            (docs/program_scheduling.md): the same count on any machine.
Anti-starvation compares like with like in both cases (Autellix's W / T): waiting seconds over
execution seconds (a call's wall time on the engine, charged beside its tokens), so `beta` is a
plain ratio.

Engine priorities: `Pick.priority` is the call's queue index (lower runs first, vLLM's rule), so
a vLLM engine with priority scheduling preempts in favor of higher queues.

Preemption (`preempt`, default on, with either service unit): the engine scheduler reports a
running call's decoded tokens and its seconds in the engine's running batch as they stream
(`progress`; wall seconds since it was sent where the engine reports none), so a long
call is charged, and demoted, while it runs; `victims` names the running calls to preempt for
waiting calls of a better queue when the engine's admission budget is full
(teola.runtime.engine_tier.preemption does the aborting and resuming). Each decoded token is
charged once: a preempted call's result at its end (the output of all its runs joined) is charged
only for the tokens no progress event of any of its runs charged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engines.requests import default
from teola.scheduling.base import Decision, Filler, Limits, Pending, Pick, Policy
from teola.scheduling.kv_room import KVRoom
from teola.scheduling.process_table import CallRecord, ProcessTable
from teola.scheduling.program.quanta import QUANTA_RULES, ObservedQuanta
from teola.scheduling.program.queues import Priority, ProgramQueues

SERVICE_UNITS = ("tokens", "seconds")
DEFAULT_QUANTUM = {"tokens": 32.0, "seconds": 0.05}
# Autellix names beta (waiting over execution time) as a latency/fairness knob but publishes no
# value; teola promotes a program's call once the program waited 8 times as long as it ran.
DEFAULT_BETA = 8.0


class ProgramPolicy(Policy):
    """The engine-scheduler policy over `ProgramQueues` (teola.scheduling.base protocol).

    Each Pending entry is one LLM call: call id = entry.name, program id = entry.query_id (a teola
    query, or a client `Program`). `schedule` admits new entries, charges waiting time since the
    last call, applies anti-starvation, and fills one batch (one op, the best-ranked entry's) in
    rank order under the instance's request and token limits; each Pick carries the call's queue
    index as the engine priority. It never holds work back (LLM engines batch continuously).
    `observe` charges service (see module docstring) and completes calls whose requests all ran.
    """

    name = "program"
    priority: Priority

    def __init__(
        self,
        num_queues: int = 8,
        base_quantum: float | None = None,
        growth: float = 2.0,
        beta: float | None = DEFAULT_BETA,
        rerank_every: int = 4,
        service: str = "seconds",
        table: ProcessTable | None = None,
        preempt: bool = True,
        promotion: str = "preempt",
        quanta: str = "observed",
        quanta_percentile: float = 95.0,
    ) -> None:
        """num_queues, base_quantum, growth: the K queues (quantum_i = base_quantum * growth**i,
        in the service unit; default base 32 tokens or 0.05 s). beta: anti-starvation ratio of
        waiting to execution seconds (None turns it off). rerank_every: re-rank at most every N scheduling
        steps while the queue's membership is unchanged. service: "tokens" or "seconds". table: a shared
        ProcessTable (e.g. the one the load balancer and `teola.api.program.Program` use). preempt: let the
        engine scheduler preempt running calls of a worse queue for waiting ones (see the module
        docstring); without it the queues still order admission and a running call runs to its end.
        promotion: "preempt" (Algorithm 1) or "admit" (a promoted call is admitted first but preempts
        only from the queue it was promoted from; teola.scheduling.program.queues). quanta:
        "observed" (re-fit base_quantum so the last queue starts at the `quanta_percentile`-th
        percentile of one completed call's service) or "fixed" (teola.scheduling.program.quanta)."""
        if service not in SERVICE_UNITS:
            raise ValueError(f"{self.name}: service must be one of {SERVICE_UNITS}, got {service!r}")
        if quanta not in QUANTA_RULES:
            raise ValueError(f"{self.name}: quanta must be one of {QUANTA_RULES}, got {quanta!r}")
        self.quanta = ObservedQuanta(num_queues, growth, quanta_percentile) if quanta == "observed" else None
        self.service = service
        self.core = ProgramQueues(
            type(self).priority,
            table,
            num_queues,
            DEFAULT_QUANTUM[service] if base_quantum is None else base_quantum,
            growth,
            beta,
            rerank_every,
            promotion,
        )
        self._outstanding: dict[Pending, int] = {}
        self._starts: dict[int, int] = {}
        self._charged: dict[Pending, float] = {}  # when each queued call's waiting was last charged
        # (service, seconds) charged to a running call's current run as it streamed
        self._progressed: dict[Pending, tuple[float, float]] = {}
        # decoded tokens charged to a preempted call's earlier runs as they streamed: its result
        # at the end counts them again (the output of all its runs joined)
        self._banked: dict[Pending, float] = {}
        # runs ended, by what their seconds were charged from: the engine's executor time, or the
        # wall time from pick to end (the named fallback `wall-time-service`)
        self.charged_from = {"executor": 0, "wall": 0}
        # preemptions by cause: the running calls' KV outgrew the budget ("kv"), a waiting call of a
        # better queue displaced one ("ranked"), or one anti-starvation promoted did ("promoted")
        self.preempted_for = {"kv": 0, "ranked": 0, "promoted": 0}
        if not isinstance(preempt, bool):
            raise ValueError(f"{self.name}: preempt must be true or false, got {preempt!r}")
        # admission control always (each call on its own stream); `preempts`: may a running call stop
        self.preemptive = True
        self.preempts = preempt

    @property
    def table(self) -> ProcessTable:
        return self.core.table

    @property
    def rerank_every(self) -> int:
        return self.core.rerank_every

    def schedule(self, queue: Sequence[Pending], now: float, limits: Limits) -> Decision:
        self._see(queue, now)
        if not queue:
            return Decision()
        core = self.core
        order = core.rank(list(queue))
        fill = Filler(limits.max_batch, limits.token_budget, limits.first_fits, limits.headroom)
        op = order[0].op
        for e in order:
            if e.op != op:
                continue
            if fill.take(e):
                fill.picks[-1].priority = core.level(e)
            if fill.full:
                break
        for p in fill.picks:
            self._outstanding[p.entry] = self._outstanding.get(p.entry, 0) + p.count
            self._starts[id(p)] = p.entry.taken
        return Decision(picks=fill.picks)

    def _see(self, queue: Sequence[Pending], now: float) -> None:
        """Admit new calls, charge waiting time, apply anti-starvation."""
        core = self.core
        charged = self._charged
        # waiting is charged per call since it was last seen queued: with per-instance queues
        # (a routing balancer) each call of `queue` may have been seen at a different time
        for e in queue:
            if e not in core.calls:
                core.admit(e, e.query_id, e.name, e.arrival, self.parents(e))
                core.wait(e, max(0.0, now - e.arrival))
            else:
                last = charged.get(e)
                if last is not None and now > last:
                    core.wait(e, now - last)
            charged[e] = now
            core.starving(e)

    def parents(self, entry: Pending) -> tuple[str, ...] | None:
        """The parents a call declares, as the process table reads them (ATLAS overrides this)."""
        return entry.parents

    # ---- preemption --------------------------------------------------------------------------------
    def progress(self, entry: Pending, decoded: int, elapsed: float | None = None) -> int:
        """A running call has decoded `decoded` tokens in `elapsed` seconds on the engine so far (of
        its current run): charge what is new in the service unit (with its seconds), demoting it
        past its quantum. Returns its queue index. Without `elapsed`, "seconds" service charges
        nothing and "tokens" service runs no starvation clock."""
        core = self.core
        if entry not in core.calls:
            return 0
        tokens, seconds = self._progressed.get(entry, (0.0, 0.0))
        new_tokens = max(0.0, decoded - tokens)
        new_seconds = max(0.0, elapsed - seconds) if elapsed is not None else 0.0
        if new_tokens > 0 or new_seconds > 0:
            self._progressed[entry] = (tokens + new_tokens, seconds + new_seconds)
            if self.service == "seconds":
                core.charge(entry, new_seconds)
            else:
                core.charge(entry, new_tokens, seconds=new_seconds)
        return core.level(entry)

    def preempted(self, pick: Pick, now: float | None = None) -> None:
        """The running call of `pick` was stopped at `now` to wait again (instead of `observe`): what
        it decoded stays charged (and is not charged again when it ends), its next run's progress
        counts from zero, and its waiting counts from `now` (not from when it was last seen queued,
        before the run it just had: that run is executed time, already charged as service)."""
        self._starts.pop(id(pick), None)
        if now is not None:
            self._charged[pick.entry] = now
        tokens, _ = self._progressed.pop(pick.entry, (0.0, 0.0))
        if tokens:
            self._banked[pick.entry] = self._banked.get(pick.entry, 0.0) + tokens
        self._release(pick)

    def _release(self, pick: Pick) -> bool:
        """The pick's requests are no longer outstanding; True if none of its entry's are."""
        e = pick.entry
        left = self._outstanding.get(e, pick.count) - pick.count
        if left > 0:
            self._outstanding[e] = left
            return False
        self._outstanding.pop(e, None)
        return True

    def victims(
        self,
        running: Sequence[Pending],
        waiting: Sequence[Pending],
        free: int,
        now: float,
        *,
        room: KVRoom | None = None,
    ) -> list[Pending]:
        """Running calls to preempt so that waiting calls of a better (lower) queue can run. Without
        `room`: beyond the `free` admission slots, each waiting call, best first, displaces the running
        call of the worst queue (the most recently demoted among equals) if that queue is worse than
        its own. With `room` (an engine with a token budget: Autellix Alg. 1, running and waiting
        ranked together under `can_fit`, `kv_victims`): the running calls' KV overflow first, then
        each waiting call that does not fit."""
        if not self.preempts or not running or not (waiting or room is not None):
            return []
        if waiting:
            self._see(waiting, now)
        core = self.core
        order = core.rank(list(waiting)) if waiting else []
        pool = sorted(
            (e for e in running if e in core.calls),
            key=lambda e: (core.calls[e].level, core.calls[e].seq),
            reverse=True,
        )
        if room is not None:
            chosen = kv_victims(core, order, pool, room)
        else:
            chosen = []
            for w in order[max(0, free) :]:
                if not pool or core.level(pool[0]) <= core.preempt_level(w):
                    break
                chosen.append((pool.pop(0), cause(core, w)))
        for _, why in chosen:
            self.preempted_for[why] += 1
        return [victim for victim, _ in chosen]

    def observe(
        self, picks: Sequence[Pick], started: float, finished: float, results: Sequence[Any] | None = None
    ) -> None:
        """Charge the batch's service to its calls and complete the calls whose requests all ran.
        `results` (optional, one per picked request in order) lets a runtime report exact decoded
        tokens ("num_output_tokens") instead of the max_tokens upper bound."""
        core = self.core
        off = 0
        for p in picks:
            e = p.entry
            a = self._starts.pop(id(p), None)
            if e not in core.calls:
                off += p.count
                continue
            streamed_tokens, streamed_seconds = self._progressed.pop(e, (0.0, 0.0))  # charged as it ran
            streamed_tokens += self._banked.pop(e, 0.0)
            executed = executor_seconds(
                results[off : off + p.count] if results is not None else None, p.count
            )
            self.charged_from["wall" if executed is None else "executor"] += 1
            if executed is None:  # no executor time reported: wall time on the engine
                seconds = max(0.0, finished - started - streamed_seconds)
            else:  # time in the engine's running batch only; the rest of the wall time was waiting
                seconds = max(0.0, executed - streamed_seconds)
                core.wait(e, max(0.0, finished - started - executed))
            if self.service == "seconds":
                amount = seconds
            else:
                if a is None:
                    raise ValueError(
                        f"{self.name}: observe() got a pick of {e.name!r} that this policy did not make"
                    )
                amount = 0.0
                for i in range(p.count):
                    r = results[off + i] if results is not None and off + i < len(results) else None
                    amount += _decoded(e.wire(a + i), r)  # its budget left when it resumed
                amount = max(0.0, amount - streamed_tokens)
            off += p.count
            if self.service == "seconds":
                core.charge(e, amount)
            else:
                core.charge(e, amount, seconds=seconds)
            if self._release(p) and e.taken >= len(e.requests):
                self._charged.pop(e, None)
                self._finished(core.finish(e, finished))

    def _finished(self, record: CallRecord | None) -> None:
        """A call completed: with quanta="observed", record its service and re-fit the quanta."""
        if self.quanta is None or record is None:
            return
        base = self.quanta.record(record.service)
        if base is not None:
            self.core.rescale(base)

    def end_program(self, pid: str) -> None:
        """Forget program `pid` (call when its query or session ends)."""
        for e in [e for e in self._outstanding if e.query_id == pid]:
            del self._outstanding[e]
        for e in [e for e in self._charged if e.query_id == pid]:
            del self._charged[e]
        for e in [e for e in self._progressed if e.query_id == pid]:
            del self._progressed[e]
        for e in [e for e in self._banked if e.query_id == pid]:
            del self._banked[e]
        self.core.end_program(pid)


def cause(core: ProgramQueues, waiting: Pending) -> str:
    """Why a running call is preempted for `waiting`: "promoted" if anti-starvation promoted it
    since it last ran, else "ranked" (its own queue is better)."""
    return "promoted" if core.calls[waiting].natural is not None else "ranked"


def kv_victims(
    core: ProgramQueues, order: list[Pending], pool: list[Pending], room: KVRoom
) -> list[tuple[Pending, str]]:
    """Alg. 1 under `can_fit` on `room`, with `order` the waiting calls best first and `pool` the
    running ones worst first: while the running calls' held tokens overflow the budget (they grow
    as they decode), the worst goes (never the last one running); then each waiting call, best
    first, is admitted if it fits, else running calls of a worse queue than its own go, worst first,
    until it fits. A call that cannot be made to fit blocks the worse ones behind it (strict
    priority, as the batch fill admits); running calls are preempted for it only if that lets it run.
    Each victim comes with its cause: "kv", or the waiting call's (`cause`)."""
    out: list[tuple[Pending, str]] = []
    seats, tokens = room.seats, room.tokens

    def drop(victim: Pending, why: str) -> None:
        nonlocal seats, tokens
        out.append((victim, why))
        seats += len(victim.requests)
        tokens += room.held.get(victim, 0)

    while tokens < 0 and len(pool) > 1:
        drop(pool.pop(0), "kv")
    for w in order:
        need, n = room.need.get(w, 0), w.remaining
        kept = len(out)
        while not (seats >= n and tokens >= need) and pool and core.level(pool[0]) > core.preempt_level(w):
            drop(pool.pop(0), cause(core, w))
        if not (seats >= n and tokens >= need):
            del out[kept:]  # preempting them would not let it run: they keep running
            break
        seats, tokens = seats - n, tokens - need
    return out


def executor_seconds(results: Sequence[Any] | None, count: int) -> float | None:
    """A call's seconds in the engine's running batch, from its requests' results: the longest of
    their "executor_s" (its requests run side by side), or None unless every one reports it."""
    if results is None or len(results) < count or count == 0:
        return None
    out = []
    for r in results[:count]:
        v = r.get("executor_s") if isinstance(r, dict) else None
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return None
        out.append(float(v))
    return max(out)


def _decoded(request: dict[str, Any], result: Any) -> float:
    if isinstance(result, dict) and isinstance(result.get("num_output_tokens"), (int, float)):
        return float(result["num_output_tokens"])
    if not default(request, "complete"):
        return 0.0
    n = request.get("max_tokens")
    return float(n) if isinstance(n, (int, float)) and n > 0 else 0.0
