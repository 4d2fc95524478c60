"""What a batching policy sees and returns. A policy is one class per file behind `Policy`.

An engine scheduler keeps one `RequestQueue` of `Pending` entries (one per primitive node dispatched
by the graph scheduler, in arrival order, also bucketed by query). Whenever an engine instance can
take work, it calls `policy.schedule(queue, now, limits)` and applies the returned `Decision`: each
`Pick` takes the next `count` not-yet-dispatched requests of one entry. `schedule` is pure CPU
logic: it must not mutate the queue or its entries and must not do I/O, so every policy is
unit-testable on a hand-built `RequestQueue([...])`.

Writing a new policy (e.g. a program-aware LLM policy such as Autellix PLAS/ATLAS):
  1. a subclass of `Policy` with a `name` and `schedule(queue, now, limits) -> Decision`;
  2. optionally a per-request engine priority in `Pick.priority` (lower runs first; vLLM's rule);
  3. optionally the hooks `Policy` declares with defaults, e.g. `observe(picks, started, finished,
     results)`, called after each batch ran, to keep per-program state such as attained service
     (`Pending.query_id` identifies the program);
  4. `register_policy("name", factory)` in `teola.scheduling.registry`.
"""

from __future__ import annotations

import abc
import bisect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from engines.machine.op_costs import OpCost
from teola.scheduling.dispatch_record import DispatchRecord, frozen_body, wire_request
from teola.scheduling.kv_room import KVRoom


@dataclass(slots=True, eq=False, kw_only=True)
class Pending:
    """One primitive node waiting in an engine queue.

    requests: its engine requests' bodies (all of the same op), read-only: a tuple of `frozen_body`s
    (the entry freezes the plain dicts it is given); `taken` of them are already dispatched.
    tokens: estimated tokens per request an LLM engine charges against its token budget (prompt +
    output; under preemption, what the request holds when admitted: teola.scheduling.preemption), else None.
    depth: the node's distance to the query's output (Algorithm 2: deeper = more contributive).
    arrival: when the node entered this queue; query_arrival: when its query started.
    work: the runtime's own bookkeeping object (policies ignore it).
    parents: for a client program's call, the ids of the earlier calls it depends on (ATLAS
    critical paths; () = a root call); None when unknown (primitives of a teola e-graph).
    tenant: whose query or program it is ("" when untenanted); the engine scheduler queues
    tenants fairly (teola.runtime.engine_tier.tenant_shares) before the policy sees the queue.
    records: one `DispatchRecord` per request: built empty or with the submitter's hints (a
    speculative call's abort keys), written afterwards by the engine tier only; an adapter
    receives `wire(i)` = `dispatch_record.wire_request(requests[i], records[i])`.
    """

    query_id: str
    name: str
    op: str
    depth: int
    arrival: float
    requests: Sequence[Mapping[str, Any]]
    tokens: list[int] | None = None
    query_arrival: float = 0.0
    taken: int = 0
    work: Any = None
    parents: tuple[str, ...] | None = None
    tenant: str = ""
    records: list[DispatchRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.requests = tuple(r if isinstance(r, MappingProxyType) else frozen_body(r) for r in self.requests)
        if not self.records:
            self.records = [DispatchRecord() for _ in self.requests]

    def wire(self, i: int) -> dict[str, Any]:
        """The request `i` as an adapter receives it (its body with its record on top)."""
        return wire_request(self.requests[i], self.records[i])

    @property
    def remaining(self) -> int:
        return len(self.requests) - self.taken

    def budget(self, i: int) -> Any:
        """Request `i`'s max_tokens now: its record's once a preempted call resumes it (the budget
        left), else its body's."""
        left = self.records[i].max_tokens
        return self.requests[i].get("max_tokens") if left is None else left

    @property
    def head(self) -> int:
        """The index of the request this entry sends next (its last once all are taken)."""
        return min(self.taken, len(self.requests) - 1)


class RequestQueue:
    """Queued entries in arrival order (iteration, `first()`), and the same entries bucketed by
    query (`buckets()`: each a list in arrival order; buckets ordered by the earliest arrival among
    their remaining entries, Teola Algorithm 2 line 9). Holds only entries with requests left.
    Insert and remove are O(bucket); `buckets()` sorts the buckets (O(B log B))."""

    __slots__ = ("_entries", "_buckets", "_tenants")

    def __init__(self, entries: Iterable[Pending] = ()) -> None:
        self._entries: dict[Pending, None] = {}
        self._buckets: dict[str, list[Pending]] = {}
        self._tenants: dict[str, int] = {}
        for e in entries:
            self.push(e)

    def push(self, e: Pending) -> None:
        self._entries[e] = None
        self._tenants[e.tenant] = self._tenants.get(e.tenant, 0) + 1
        b = self._buckets.get(e.query_id)
        if b is None:
            self._buckets[e.query_id] = [e]
        elif b[-1].arrival <= e.arrival:
            b.append(e)
        else:  # an older entry back in the queue (a preempted call): keep the bucket in arrival order
            bisect.insort(b, e, key=lambda x: x.arrival)

    def discard(self, e: Pending) -> bool:
        if e not in self._entries:
            return False
        del self._entries[e]
        left = self._tenants[e.tenant] - 1
        if left:
            self._tenants[e.tenant] = left
        else:
            del self._tenants[e.tenant]
        b = self._buckets[e.query_id]
        b.remove(e)
        if not b:
            del self._buckets[e.query_id]
        return True

    def first(self) -> Pending:
        return next(iter(self._entries))

    def tenants(self) -> list[str]:
        """The tenants with entries queued."""
        return list(self._tenants)

    def buckets(self, by_query: bool = False) -> list[list[Pending]]:
        """Buckets by the earliest arrival among their remaining entries (ties: first queued first);
        `by_query`: by their query's start first, then by that arrival."""
        if by_query:
            return sorted(self._buckets.values(), key=lambda b: (b[0].query_arrival, b[0].arrival))
        return sorted(self._buckets.values(), key=lambda b: b[0].arrival)

    def __iter__(self) -> Iterator[Pending]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __contains__(self, e: object) -> bool:
        return e in self._entries


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What the target engine instance can take now.

    max_batch: the most requests one batch may hold. max_efficient_batch: the pre-tuned size past
    which throughput stops growing. token_budget: tokens still free on the instance for LLM
    engines (0 = no token limit). first_fits: the first request is taken even past token_budget (it
    runs alone); False while calls already run on the instance (Autellix's can_fit). headroom: the
    tokens each request takes beyond what its entry charges (once the engine reports its KV block
    size, the block less the headroom charges were estimated with: teola.scheduling.kv_ledger).
    op_costs: the instance's reported seconds per request and per item of each op it runs (fitted at
    start or a profile's: engines.machine.op_costs), by op name; {} where it reports none (LLMs)."""

    max_batch: int
    max_efficient_batch: int
    token_budget: int = 0
    first_fits: bool = True
    headroom: int = 0
    op_costs: Mapping[str, OpCost] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class Pick:
    """Take the next `count` requests of `entry`; `priority` (optional) goes to the engine."""

    entry: Pending
    count: int
    priority: int | None = None


@dataclass(slots=True, kw_only=True)
class Decision:
    """A batch (`picks`, all of one op) or nothing. With no picks, `wait_until` asks the scheduler
    to call again at that time even if nothing new arrives (a batching timeout)."""

    picks: list[Pick] = field(default_factory=list)
    wait_until: float | None = None

    @property
    def size(self) -> int:
        return sum(p.count for p in self.picks)


class Policy(abc.ABC):
    """The base of every batching policy. A policy gives `name` and `schedule`, which reads the queue
    (never changes it) and returns a Decision. The runtime passes a `RequestQueue`; policies should
    also accept a plain list of entries in arrival order (handy in tests): iterate it, or wrap it
    with `RequestQueue(entries)`.

    Everything else is an optional hook with its default here; the engine scheduler calls them on
    every policy and never probes for them:
      preemptive: on an LLM engine, run decoding calls (each decoding entry, single or batched, is
        one call) through admission control (the engine's capacity, or its max efficient batch with
        `Engine(admission="efficient_batch")`) with preemption (teola.runtime.engine_tier.preemption);
      wants_progress: a preemptive policy hears each running call's decoded tokens (`progress`);
      rerank_every: progress events between two preemption checks of an instance;
      returns_each: on an engine that batches continuously, each entry of a batch gets its results
        as its own requests end (topology-aware batching), not when the batch's last one does;
      table: the policy's process table (program-level policies), where a routing balancer keeps its
        program pins; None: the balancer keeps its own.
    """

    name: str = ""
    preemptive: bool = False
    wants_progress: bool = True
    rerank_every: int = 4
    returns_each: bool = False
    table: Any = None

    @abc.abstractmethod
    def schedule(self, queue: RequestQueue, now: float, limits: Limits) -> Decision:
        """The next batch from `queue` at time `now` within `limits`
        (pure: no I/O, no change to the queue)."""

    def observe(self, picks: list[Pick], started: float, finished: float, results: list[Any] | None) -> None:
        """A batch of these picks ran from `started` to `finished` with these engine results."""

    def progress(self, entry: Pending, decoded: int, elapsed: float | None = None) -> int | None:
        """A running (preemptive) call has decoded `decoded` tokens in `elapsed` seconds so far.
        Returns its engine priority now (a program policy's queue index: the engine tier re-ranks
        the call in an engine with `Capability.RERANK` when it changed), or None."""
        return None

    def preempted(self, pick: Pick, now: float | None = None) -> None:
        """The running call of `pick` was preempted at `now` and waits in the queue again."""

    def victims(
        self,
        running: list[Pending],
        waiting: list[Pending],
        free: int,
        now: float,
        *,
        room: KVRoom | None = None,
    ) -> list[Pending]:
        """Running calls that waiting ones should displace (preemptive policies), with `free`
        admission slots left and, on an engine with a token budget, its KV `room`; none by default."""
        return []

    def end_program(self, pid: str) -> None:
        """Program (query or client session) `pid` ended: forget it."""
        if self.table is not None:
            self.table.end_program(pid)

    def observe_api(self, tool: str, seconds: float) -> None:
        """A tool call of `tool` took `seconds` (policies that predict API durations keep a mean)."""

    def pause_costs(self) -> PauseModel | None:
        """The policy's own cost model for calls that pause for tools (LAMPS), which then decides
        their handling instead of the runtime's `pause_costs`; None: the policy keeps none."""
        return None


@dataclass(frozen=True, slots=True)
class PauseModel:
    """A policy's own pause costs: seconds to recompute one context token, to swap one token's KV one
    way (None: no swap), expected seconds per tool, and the context of the rest of the batch."""

    fwd_s: float
    swap_s: float | None
    api_means: dict[str, float]
    other_context: int


def check_policy(policy: Any, name: str) -> Policy:
    """`policy` when it is a `Policy`; otherwise a TypeError naming the fix."""
    if not isinstance(policy, Policy):
        raise TypeError(
            f"batching policy {name!r} built a {type(policy).__name__}, which does not subclass "
            "teola.scheduling.base.Policy; subclass it (its hooks then have their defaults)"
        )
    return policy


class Filler:
    """Fills one batch under a request-count cap and an optional token budget. The first request
    always fits (a request larger than the budget still runs, alone) unless `first_fits` is False.
    Each request takes its entry's charge plus `headroom` tokens (Limits.headroom)."""

    __slots__ = ("slots", "tokens", "picks", "saturated", "first_fits", "headroom")

    def __init__(self, slots: int, token_budget: int = 0, first_fits: bool = True, headroom: int = 0) -> None:
        self.slots = slots
        self.tokens = token_budget if token_budget > 0 else None
        self.first_fits = first_fits
        self.headroom = headroom
        self.picks: list[Pick] = []
        self.saturated = False  # stopped because the batch is full (not because entries ran out)

    @property
    def full(self) -> bool:
        return self.saturated or self.slots <= 0

    def take(self, entry: Pending, limit: int | None = None) -> int:
        """Take as many of `entry`'s remaining requests as fit (at most `limit`); returns how many."""
        n = 0
        want = entry.remaining if limit is None else min(limit, entry.remaining)
        toks = entry.tokens
        i = entry.taken
        while n < want:
            if self.slots <= 0:
                self.saturated = True
                break
            if self.tokens is not None and toks is not None:
                t = toks[i + n] + self.headroom
                if t > self.tokens and (self.picks or n or not self.first_fits):
                    self.saturated = True
                    break
                self.tokens -= t
            self.slots -= 1
            n += 1
        if n:
            self.picks.append(Pick(entry=entry, count=n))
        if self.slots <= 0 and n == want and want < entry.remaining:
            self.saturated = True
        return n

    @property
    def size(self) -> int:
        return sum(p.count for p in self.picks)


def fill_in_order(ranked: list[Pending], limits: Limits) -> Filler:
    """A batch of the first entry's op, taking same-op entries in the given order until it is full
    (the shape of every ranking policy's batch)."""
    fill = Filler(limits.max_batch, limits.token_budget, limits.first_fits, limits.headroom)
    op = ranked[0].op
    for e in ranked:
        if e.op == op:
            fill.take(e)
            if fill.full:
                break
    return fill


def resumes_preserved(e: Pending) -> bool:
    """Whether `e`'s next request continues a call whose KV was preserved while it paused for a
    tool (its record's `resumes_preserved`: the submitter's hint, teola.api.tool_calls, or the engine
    scheduler's pause book, teola.scheduling.program.pause_handling). INFERCEPT keeps a preserved request
    in the running batch: it resumes as its API returns. Ranked behind other calls instead, it would
    keep its KV pinned while it waits, which neither INFERCEPT's nor LAMPS' waste equations count and
    which, once memory is short, leaves most of the KV to paused calls; the API-call-aware policies
    (fcfs, sjf, lamps) therefore send it first."""
    return e.taken < len(e.requests) and e.records[e.taken].resumes_preserved


class RankedAdmission(Policy):
    """A non-preemptive policy under admission control (teola.runtime.engine_tier.preemption) that admits
    waiting calls in the order of `rank` and never charges running ones (no progress events), a
    call resuming on preserved KV first (`resumes_preserved`). Subclasses give `name` and `rank`."""

    name = "ranked"
    preemptive = True  # run through the Preemptor for its admission control; it never preempts
    wants_progress = False

    @abc.abstractmethod
    def rank(self, e: Pending) -> Any:
        """The sort key of a waiting call: lower runs first."""

    def schedule(self, queue: RequestQueue, now: float, limits: Limits) -> Decision:
        if not queue:
            return Decision()
        return Decision(
            picks=fill_in_order(
                sorted(queue, key=lambda e: (not resumes_preserved(e), self.rank(e))), limits
            ).picks
        )

    def progress(self, e: Pending, decoded: int, elapsed: float | None = None) -> None:
        """Running calls are never demoted or preempted."""
