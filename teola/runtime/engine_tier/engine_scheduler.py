"""Lower tier: one engine scheduler per engine. It keeps the queue of primitive nodes dispatched by
the graph scheduler, asks its policy for a batch whenever an instance can take one, and runs the
batch on that instance through the executor.

Two ways to spread work over instances (the engine spec's `balancer`, teola.balancers):
  - "least_loaded" (default): one shared queue; the least loaded free instance takes the next batch.
  - a per-call router ("locality", "least_used", "round_robin"): each entry is routed when it
    arrives (as Autellix routes each call on arrival) to one instance's own queue, from its program
    (query id) and prompt tokens; every free instance then gets a batch from its own queue. The
    locality router keeps its program pins in the policy's process table when the policy has one,
    so a pin disappears when the program ends.
Time is the event loop's (`loop.time()`), so a virtual-time loop drives this unchanged."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import teola.runtime.engine_tier.runners as runners
from engines.protocol import Capability
from teola.balancers import DEFAULT_BALANCER, LeastLoaded, make_balancer
from teola.ir.engine_spec import Engine
from teola.ir.ops import PrimOp
from teola.runtime.engine_tier.arrival import charges, write_hints
from teola.runtime.engine_tier.batch_runner import abort_on
from teola.runtime.engine_tier.engine_context import EngineContext, Span
from teola.runtime.engine_tier.preemption import Preemptor
from teola.runtime.engine_tier.running_owners import RunningOwners
from teola.runtime.engine_tier.supervisor import Supervisor
from teola.runtime.engine_tier.taking import start_calls, take
from teola.runtime.engine_tier.tenant_shares import TenantShares
from teola.runtime.engine_tier.token_estimates import estimate_prompt_tokens
from teola.runtime.executors.executor import Executor, Instance
from teola.runtime.metrics import Metrics
from teola.scheduling.base import Limits, Pending, Pick, Policy, RequestQueue
from teola.scheduling.preemption import preemptible
from teola.scheduling.process_table import ProcessTable
from teola.scheduling.program.pause_handling import PauseBook, PauseCosts

STREAM_OP = PrimOp.PARTIAL_DECODING.value
log = logging.getLogger("teola.runtime")


class EngineScheduler:
    """Batches the queued requests of one engine onto its instances: it decides (queue + policy ->
    picks, on which instance); the batch runner (batch_runner, preemption) executes,
    through the narrow `EngineContext` this scheduler builds.

    Work enters with `submit(entry)`; scheduling runs on the next loop iteration (so everything
    submitted in one tick can share a batch), again when a batch finishes, and when a policy asks
    to be called back (batching timeouts). Each entry's `work` is told what happened to it
    (teola.runtime.engine_tier.work.Work). `balancer` is the spec's per-call router (None for the default
    shared queue, where `picker` chooses the instance for each batch). When entries of several
    tenants wait, the policy sees only those of the tenants within their fair share (`shares`)."""

    def __init__(
        self,
        spec: Engine,
        instances: list[Instance],
        *,
        executor: Executor,
        policy: Policy,
        metrics: Metrics,
        llm: bool,
        tenant_shares: dict[str, float] | None = None,
        pause_costs: PauseCosts | None = None,
        length_predictor: Any = None,
        supervisor: Supervisor | None = None,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.instances = instances
        self.executor = executor
        self.metrics = metrics
        self.llm = llm
        self.continuous = spec.continuous
        budget = spec.token_budget or (instances[0].profile.token_budget if instances else 0)
        self.token_budget = budget if llm else 0
        caps = [i.profile.max_batch or spec.max_batch for i in instances] or [spec.max_batch]
        self.max_batch = max(1, min(spec.max_batch, *caps) if spec.max_batch_given else min(caps))
        self.max_efficient_batch = max(1, min(spec.max_efficient_batch, self.max_batch))
        self.picker = LeastLoaded(by_tokens=llm, token_budget=self.token_budget)
        self.shares = TenantShares(tenant_shares, quantum=self.max_efficient_batch)
        self.queue = RequestQueue()
        self.balancer: Any = None
        self.queues: dict[Instance, RequestQueue] = {}
        if spec.balancer != DEFAULT_BALANCER:
            self.balancer = make_balancer(
                spec.balancer, load=self.load, table=ProcessTable(), **spec.balancer_options
            )
            self.queues = {inst: RequestQueue() for inst in instances}
        self._own_table: ProcessTable | None = self.balancer.table if self.balancer is not None else None
        self.preemptor: Preemptor | None = None
        self._said_unpreemptible = False
        self.batches = 0
        self._kicked = False
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()
        self.pauses = PauseBook(pause_costs, batch_size=self.max_efficient_batch) if llm else None
        self.length_predictor = length_predictor  # the Runtime option of that name
        self.supervisor = supervisor
        self.loop = asyncio.get_running_loop()
        self._closed = False
        self.ctx = self._context()
        self.policy = policy

    def _context(self) -> EngineContext:
        """The narrow view of this scheduler that its batch runners and preemptor get."""
        return EngineContext(
            name=self.name,
            executor=self.executor,
            metrics=self.metrics,
            loop=self.loop,
            running=RunningOwners(),
            spawn=self.spawn,
            alive=self.alive,
            observe=self._observe,
            landed=self._landed,
            kick=self.kick,
            policy=lambda: self._policy,
            waiting=lambda inst: self.queues.get(inst) or self.queue,
            next_batch=self._next_batch,
        )

    # ---- policy and programs --------------------------------------------------------------------
    @property
    def policy(self) -> Policy:
        return self._policy

    @policy.setter
    def policy(self, policy: Policy) -> None:
        """Switch the policy; a locality router keeps its pins in the new policy's process table. A
        preemptive policy on an LLM engine runs its calls through a Preemptor
        (teola.runtime.engine_tier.preemption) admitting what the engine holds (max_batch calls while the
        token budget has room), or at most the max efficient batch with the engine option
        admission="efficient_batch"."""
        self._policy = policy
        self.preemptor = (
            Preemptor(self.ctx, self.admission_budget(), self.token_budget, live=policy.wants_progress)
            if self.llm and policy.preemptive
            else None
        )
        if self.preemptor is not None:
            self._say_unpreemptible()
        if self._own_table is not None:
            table = policy.table
            self.balancer.table = table if isinstance(table, ProcessTable) else self._own_table

    def _say_unpreemptible(self) -> None:
        """Log once per engine when its instances offer nothing to preempt with: no abort, or no
        stream (whose results would carry the decoded token ids a call resumes from)."""
        lacking = sorted(
            {
                c.value
                for i in self.instances
                for c in (Capability.ABORT, Capability.STREAM)
                if c not in i.capabilities
            }
        )
        if lacking and not self._said_unpreemptible:
            self._said_unpreemptible = True
            log.warning(
                "engine %s: policy %r preempts running calls, but the engine offers no %s: its calls "
                "run to their end once admitted",
                self.name,
                self._policy.name,
                " or ".join(lacking),
            )

    def admission_budget(self) -> int:
        """How many preemptable calls may run on an instance at once (the spec's `admission`)."""
        if getattr(self.spec, "admission", "capacity") == "efficient_batch":
            return self.max_efficient_batch
        return self.max_batch

    def end_program(self, pid: str) -> None:
        """Program (query or client session) `pid` ended: the policy and the router forget it."""
        self._policy.end_program(pid)
        if self._own_table is not None:
            self._own_table.end_program(pid)
        if self.pauses is not None:
            self.pauses.end_program(pid)

    # ---- queue ----------------------------------------------------------------------------------
    def submit(self, entry: Pending) -> None:
        """Queue one entry (with a router: on the instance it routes to) and schedule soon. An LLM
        engine's entries carry their requests' estimated tokens (prompt + output budget)."""
        if self.llm and entry.tokens is None:
            entry.tokens = charges(entry, live=self.preemptor is not None and self.preemptor.live)
        if self.pauses is not None:  # an LLM engine: the program hints go into the records
            write_hints(entry, self.pauses, self._policy, self.length_predictor, self.name)
        if self.balancer is None:
            self.queue.push(entry)
        else:
            tokens = max((estimate_prompt_tokens(r) for r in entry.requests), default=0) if self.llm else 0
            self.queues[self.balancer.route(self.instances, entry.query_id, tokens)].push(entry)
        self.kick()

    def remove(self, entry: Pending) -> bool:
        """Drop a queued entry (its query ended or no longer needs it); False if it was no longer
        queued. A preemptable call that is running is aborted in the engine instead, and so are
        running requests that carry a "tag" (a speculative call its condition discarded)."""
        if self.queue.discard(entry) or any(q.discard(entry) for q in self.queues.values()):
            if self.preemptor is not None:
                self.preemptor.forget(entry, self.instances)
            return True
        if self.preemptor is not None and self.preemptor.cancel(entry):
            return False
        tags = [t for i in range(entry.taken) if (t := entry.wire(i).get("tag"))]
        if tags and self.llm:
            for inst, _ in list(self.ctx.running.running(entry.query_id)):
                if Capability.ABORT in inst.capabilities:
                    self.spawn(abort_on(self.ctx, inst, tags))
        return False

    def queued(self) -> int:
        """Entries waiting (with requests not yet dispatched), over all queues."""
        return len(self.queue) + sum(len(q) for q in self.queues.values())

    def load(self, inst: Instance) -> int:
        """How used an instance is, for routers: requests in flight plus requests queued on it."""
        q = self.queues.get(inst)
        return inst.outstanding + (sum(e.remaining for e in q) if q else 0)

    def kick(self) -> None:
        if not self._kicked and not self._closed:
            self._kicked = True
            self.loop.call_soon(self._schedule)

    # ---- scheduling -----------------------------------------------------------------------------
    def _schedule(self) -> None:
        self._kicked = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.balancer is not None:
            self._schedule_routed()
            return
        while self.queue and not self._closed:
            pre = self.preemptor
            free = [i for i in self.instances if (pre is None or pre.free(i) > 0) and self.picker.free(i)]
            inst = self.picker.pick(free)
            if inst is None:
                if pre is not None:
                    for i in self.instances:
                        pre.check(i)
                return  # a finishing batch kicks again
            now = self.loop.time()
            decision = self._policy.schedule(self._visible(self.queue), now, self._limits(inst, len(free)))
            if not decision.picks:
                if pre is not None:  # the best waiting call does not fit: a worse running one may go
                    pre.check(inst)
                if decision.wait_until is not None:
                    self._timer = self.loop.call_at(
                        decision.wait_until, self.kick
                    )  # at, not later: no rounding
                return
            self._dispatch(inst, decision.picks, self.queue)

    def _schedule_routed(self) -> None:
        """Per-instance queues: each free instance gets batches from its own queue."""
        wait_until: float | None = None
        progress = True
        while progress and not self._closed:
            progress = False
            for inst in self.instances:
                queue = self.queues[inst]
                if not queue or not self.picker.free(inst):
                    continue
                if self.preemptor is not None and self.preemptor.free(inst) <= 0:
                    self.preemptor.check(inst)
                    continue
                now = self.loop.time()
                decision = self._policy.schedule(self._visible(queue), now, self._limits(inst))
                if decision.picks:
                    self._dispatch(inst, decision.picks, queue)
                    progress = True
                elif decision.wait_until is not None:
                    wait_until = (
                        decision.wait_until if wait_until is None else min(wait_until, decision.wait_until)
                    )
        if wait_until is not None and not self._closed:
            self._timer = self.loop.call_at(wait_until, self.kick)

    def _visible(self, queue: RequestQueue) -> RequestQueue:
        """What the policy may pick from: the queue, or the entries of the tenants within their share."""
        view = self.shares.view(queue)
        return queue if view is None else view

    def _limits(self, inst: Instance, free: int = 1) -> Limits:
        """The batch `inst` may take; with `free` instances able to take one, at most its share of the
        shared queue's requests, so work that is ready at once is spread over the free instances
        instead of filling the first one while the others idle."""
        free_tokens = max(1, self.token_budget - inst.tokens) if self.token_budget else 0
        slots = self.max_batch if self.preemptor is None else min(self.max_batch, self.preemptor.free(inst))
        first_fits = self.preemptor is None or self.preemptor.first_fits(inst)
        headroom = 0 if self.preemptor is None else self.preemptor.headroom(inst)
        efficient = self.max_efficient_batch
        if free > 1:
            share = -(-sum(e.remaining for e in self.queue) // free)
            slots, efficient = max(1, min(slots, share)), max(1, min(efficient, share))
        return Limits(
            max_batch=slots,
            max_efficient_batch=efficient,
            token_budget=free_tokens,
            first_fits=first_fits,
            headroom=headroom,
            op_costs={} if self.llm else inst.op_costs,
        )

    def _dispatch(self, inst: Instance, picks: list[Pick], queue: RequestQueue) -> None:
        op = picks[0].entry.op
        self.shares.served([(p.entry, p.count) for p in picks], queue)
        runner = runners.choose(
            runners.BatchFacts(
                op=op,
                entries=len(picks),
                preemptible=self.preemptor is not None and preemptible(op, picks),
                continuous=self.continuous,
                returns_each=self._policy.returns_each,
            )
        )
        if runner is runners.Runner.CALLS:
            assert self.preemptor is not None
            start_calls(self.preemptor, inst, picks, queue)
            return
        requests, spans, tokens = take(op, picks, queue, policy=self._policy.name, llm=self.llm)
        batch_id = self._next_batch()
        inst.inflight += 1
        inst.outstanding += len(requests)
        inst.tokens += tokens
        self.ctx.running.count(inst, spans, 1)
        self.metrics.observe_batch(self.name, len(requests))
        t = self.loop.time()
        for e, _a, _b in spans:
            e.work.started(inst, batch_id, len(requests), t)
        self.spawn(runners.BATCH_RUNNERS[runner](self.ctx, inst, op, requests, spans, tokens, picks))

    def _next_batch(self) -> str:
        self.batches += 1
        return f"{self.name}:{self.batches}"

    def spawn(self, coro: Any) -> None:
        """Run `coro` as a task of this scheduler (cancelled by close())."""
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def alive(self, inst: Instance, exc: BaseException) -> bool:
        """After a failed batch: whether the instance is still healthy (with no supervisor, assume so)."""
        return True if self.supervisor is None else await self.supervisor.alive(inst, exc)

    def _landed(self, inst: Instance, requests: list[dict[str, Any]], spans: list[Span], tokens: int) -> None:
        inst.inflight -= 1
        inst.outstanding -= len(requests)
        inst.tokens -= tokens
        self.ctx.running.count(inst, spans, -1)
        self.kick()

    def abort(self, owner: str) -> int:
        """Ask every instance running requests of `owner` (a query that ended) to stop them, when its
        adapter can (an `abort` method; vLLM aborts the requests inside the engine). Returns how
        many running requests the engines were asked to stop; the batches then land as usual."""
        asked = 0
        # its preemptable calls end for good: the engine is told not to save their KV
        keys = self.preemptor.cancel_owner(owner) if self.preemptor is not None else {}
        for inst, n in list(self.ctx.running.running(owner)):
            if Capability.ABORT in inst.capabilities:
                asked += n
                self.spawn(abort_on(self.ctx, inst, [owner], keys.get(inst)))
        return asked

    def _observe(self, picks: list[Pick], started: float, finished: float, results: list[Any] | None) -> None:
        """Tell the policy what ran: its picks, when, and the engine results."""
        self._policy.observe(picks, started, finished, results)

    def tasks(self) -> list[asyncio.Task]:
        """The batches running now."""
        return list(self._tasks)

    # ---- shutdown ------------------------------------------------------------------------------
    async def close(self) -> None:
        """Stop scheduling and cancel batches in flight."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self.queue = RequestQueue()
        self.queues = {inst: RequestQueue() for inst in self.queues}
