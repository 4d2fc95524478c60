"""Preemptive LLM calls under a program policy (Autellix §4) on an unpatched vLLM: the part that talks
to engines; the rules it applies are teola.scheduling.preemption's, the victims the policy's.

With a policy whose `preemptive` is true (mlfq, plas, atlas by default), the engine scheduler runs
each decoding entry, and each partial decode, as one preemptible call: its own engine stream (vLLM
batches running requests continuously anyway), all of its requests under one tag. An entry of
several requests (a map over chunks, an e-graph decoding primitive with a batch of prompts) is one
call of its program: it is admitted whole, preempted whole and resumed whole. The scheduler:
  - admission: at most `budget` requests run on an instance at once (the engine's max_batch, vLLM's
    max_num_seqs; or its max efficient batch with `Engine(admission="efficient_batch")`), and, on an
    instance with a `token_budget` (its KV cache: vLLM's blocks x block size, the simulated engine's
    pool), a waiting call only if it fits beside the running ones (Autellix Alg. 1's can_fit): each
    running request holds its prompt + the tokens decoded so far (they grow with its progress
    events) + one block of headroom, a waiting one its prompt (with the ids it resumes from) + one
    block (teola.scheduling.preemption.held_tokens), on the engine's own numbers once it reports
    them (teola.scheduling.kv_ledger); alone on an idle instance a call always runs.
    So calls wait in teola's queue, where the policy orders them, not in the engine's. (A policy
    without progress events, lamps / sjf, is charged each call's prompt + whole output budget.)
  - service while running: the call's decoded-token count (summed over its requests) and its seconds
    on the engine stream back ("progress") and the policy charges them as they grow
    (`policy.progress`), so a long call is demoted while it runs (a policy with
    `wants_progress = False`, which never charges running calls, gets no progress events);
  - preemption: every `rerank_every` progress events, and whenever work arrives at a full instance,
    `policy.victims` names running calls of a worse queue than waiting ones; each is aborted in the
    engine (by its tag: every request of it), each request returns the token ids it decoded, and
    the call waits in the queue again (its work hears `requeued`); when picked it resumes: each
    unfinished request as its prompt + its own token ids so far (the prefix cache holds most of
    them, or, on an engine with kv_swap, host memory: each request carries a "kv_swap_key" that
    survives its resumes) with its remaining max_tokens, while a request that had ended is not sent
    again; each request's final text is its parts joined;
  - cancellation: a call whose caller went away is stopped for good through the adapter's
    `cancel(tags, kv_keys)` where it has one, which tells a kv_swap engine not to save its KV (it
    never resumes), and a waiting preempted call's saved KV is dropped (`forget_kv`).
An engine that does not report `output_token_ids` is never preempted mid-call (no way to resume).
A partial decode (decode pipelining's `partial_decoding`: one streaming request whose items go
downstream as they are parsed) sends each item downstream once, whole and in order, over all its
runs (teola.runtime.engine_tier.call_items).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from engines.protocol import Capability, StreamEvent
from engines.requests import DECODE_OPS
from engines.stream_events import Delta, KVReport, Progress
from teola.runtime.engine_tier.call_items import CallItems
from teola.runtime.engine_tier.call_requeue import requeue
from teola.runtime.engine_tier.call_resume import Resume, joined, text_of
from teola.runtime.engine_tier.call_stops import forget_kv_on, stop_call
from teola.runtime.engine_tier.engine_context import EngineContext
from teola.runtime.engine_tier.running_call import RunningCall
from teola.runtime.engine_tier.stream_consumer import Handler, consume
from teola.runtime.engine_tier.supervisor import down_error
from teola.runtime.executors.executor import Instance, checked_results
from teola.scheduling.base import Pending, Pick, RequestQueue
from teola.scheduling.kv_ledger import KVLedger
from teola.scheduling.kv_room import KVRoom
from teola.scheduling.preemption import STREAM_OP, admission_slots, swap_keys

log = logging.getLogger("teola.runtime")


class Preemptor:
    """The preemptive side of one LLM engine scheduler (see the module docstring)."""

    def __init__(self, ctx: EngineContext, budget: int, token_budget: int = 0, live: bool = False) -> None:
        """`live`: the entries' tokens are what their requests hold now (estimate_held_tokens), and a
        running call's grow with its progress events (admission by live KV use)."""
        self.ctx = ctx
        self.budget = max(1, budget)
        self.token_budget = max(0, token_budget)
        self.live = live
        self.calls: dict[Instance, dict[Pending, RunningCall]] = {}
        self.resumes: dict[Pending, list[Resume]] = {}  # per preempted entry: one per request
        self.ledgers: dict[Instance, KVLedger] = {}  # per instance: its KV on the engine's numbers
        self._tags = itertools.count()

    def running(self, inst: Instance) -> int:
        """Requests of preemptible calls running on `inst`."""
        return sum(len(c.requests) for c in self.calls.get(inst, {}).values())

    def free(self, inst: Instance) -> int:
        """Admission slots left on `inst`: none while the calls running there fill its token budget."""
        return admission_slots(self.budget, self.token_budget, self.running(inst), inst.tokens)

    def first_fits(self, inst: Instance) -> bool:
        """Whether the best waiting call runs even past the token budget: only while nothing runs on
        `inst` under live admission (Autellix's can_fit: with calls running it waits unless it fits)."""
        return not self.live or self.running(inst) == 0

    def headroom(self, inst: Instance) -> int:
        """Tokens each request holds beyond its charge (estimated with a 16-token headroom): one
        engine block less that, once the engine reports its block (live admission only)."""
        return self.ledger(inst).headroom_change() if self.live else 0

    # ---- running calls --------------------------------------------------------------------------
    def start(self, inst: Instance, pick: Pick, queue: RequestQueue) -> None:
        """Run the call of `pick` (its entry already taken whole from `queue`) on `inst` as its own
        stream: the entry's requests that have not ended yet."""
        ctx = self.ctx
        e = pick.entry
        tag = f"{ctx.name}:call{next(self._tags)}"
        resumes = self.resumes.get(e)
        sent = [i for i in range(len(e.requests)) if resumes is None or resumes[i].final is None]
        assert sent, f"call {e.name!r} started with every request ended"
        progress = ctx.policy().wants_progress  # lamps / sjf never charge running calls
        requests = []
        for i in sent:
            rec = e.records[i]
            rec.call_tag = tag
            # names the request's KV across its resumes: an engine with kv_swap saves it on preemption
            if rec.kv_swap_key is None:
                rec.kv_swap_key = tag if len(e.requests) == 1 else f"{tag}.{i}"
            if progress:
                rec.progress = True
            requests.append(e.wire(i))
        pad = self.headroom(inst)
        held = {j: e.tokens[i] + pad if e.tokens else 0 for j, i in enumerate(sent)}
        call = RunningCall(
            inst=inst,
            pick=pick,
            queue=queue,
            tag=tag,
            sent=sent,
            requests=requests,
            tokens=sum(held.values()),
            started=ctx.loop.time(),
            held=held,
        )
        if e.op == STREAM_OP and e.requests[0].get("split"):
            call.items = resumes[0].items if resumes is not None else CallItems(e.work, e.requests[0])
        self.calls.setdefault(inst, {})[e] = call
        inst.outstanding += len(sent)
        inst.tokens += call.tokens
        ctx.running.count(inst, [(e, 0, len(sent))], 1)
        ctx.metrics.observe_batch(ctx.name, len(sent))
        e.work.started(inst, ctx.next_batch(), len(sent), call.started)
        ctx.spawn(self._run(call))

    async def _run(self, call: RunningCall) -> None:
        ctx, inst, e = self.ctx, call.inst, call.pick.entry
        try:
            try:
                finals = await self._outcome(call)
            finally:
                self._drop(call)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.resumes.pop(e, None)
            e.work.failed(exc if await ctx.alive(inst, exc) else down_error(ctx.name, inst, exc), inst)
            ctx.kick()
            return
        for req, final in zip(call.requests, finals):
            if req.get("resume_ids"):
                self.note_resumed(final)
        if not (call.stopping and requeue(ctx, call, finals, self.resumes, live=self.live)):
            self._deliver(call, finals)
        ctx.kick()

    async def _outcome(self, call: RunningCall) -> list[Any]:
        """Run the call on its instance (streamed when the adapter can, so progress and text deltas
        arrive as it decodes); the final result of each request sent."""
        ctx, e, n = self.ctx, call.pick.entry, len(call.requests)
        if Capability.STREAM not in call.inst.capabilities:  # no progress: it runs to its end
            finals = checked_results(ctx.name, await ctx.executor.execute(call.inst, e.op, call.requests), n)
            if call.items is not None and isinstance(finals[0], dict):  # its items come with its result
                for item in finals[0].get("items") or ():
                    call.items.engine_item(item, call.stopping, ctx.loop.time())
            return finals
        return await consume(ctx, call.inst, e.op, call.requests, self._handlers(call), what="call")

    def _handlers(self, call: RunningCall) -> dict[StreamEvent, Handler]:
        """What a call's stream events do: progress charges the policy, text deltas go to the call's
        work (or, for a partial decode, to its items, each released downstream once it is whole)."""
        items, work = call.items, call.pick.entry.work

        def progress(idx: int, payload: Progress, t: float) -> None:
            if items is not None:
                items.release(t)
            self._progress(call, idx, payload.tokens, payload.executor_s)

        def delta(idx: int, payload: Delta, t: float) -> None:
            if items is None:
                work.delta(payload.text, t)
            else:
                items.release(t)
                items.delta(payload.text, t)

        handlers: dict[StreamEvent, Handler] = {
            StreamEvent.PROGRESS: progress,
            StreamEvent.DELTA: delta,
            StreamEvent.KV: lambda idx, report, t: self._kv(call, idx, report),
        }
        if items is not None:
            handlers[StreamEvent.ITEM] = lambda idx, item, t: items.engine_item(item.text, call.stopping, t)
        return handlers

    def _progress(self, call: RunningCall, idx: int, decoded: int, executor_s: float | None = None) -> None:
        policy = self.ctx.policy()
        if self.live:  # the call holds its decoded tokens too
            grown = decoded - call.decoded.get(idx, 0)
            call.tokens += grown
            call.inst.tokens += grown
            call.held[idx] = call.held.get(idx, 0) + grown
            if idx in call.prompt:
                self.ledger(call.inst).grew(grown)
        call.decoded[idx] = decoded
        if executor_s is not None:
            call.executed[idx] = executor_s
        # seconds in the engine's running batch where it reports them (its requests run side by
        # side: the longest), else wall time since the run was sent (`wall-time-service`)
        elapsed = max(call.executed.values()) if call.executed else self.ctx.loop.time() - call.started
        level = policy.progress(call.pick.entry, sum(call.decoded.values()), elapsed)
        if (
            isinstance(level, int)
            and level != call.pick.priority
            and Capability.RERANK in call.inst.capabilities
        ):
            # the call's queue changed while it runs: the engine's own order follows (issue 73)
            call.pick.priority = level
            self.ctx.spawn(self.ctx.executor.call(call.inst, Capability.RERANK, [call.tag], level))
        call.events += 1
        if call.events % policy.rerank_every == 0:
            self.check(call.inst)

    def ledger(self, inst: Instance) -> KVLedger:
        """`inst`'s KV on the engine's numbers (teola.scheduling.kv_ledger)."""
        return self.ledgers.setdefault(inst, KVLedger())

    def _kv(self, call: RunningCall, idx: int, report: KVReport) -> None:
        """The engine's own numbers for request `idx` of `call` (engines.stream_events.KVReport): its first
        report replaces teola's estimate of its prompt and headroom; used blocks rebase the instance."""
        if not self.live:
            return
        ledger, inst, before = self.ledger(call.inst), call.inst, call.inst.tokens
        if idx not in call.prompt and idx in call.held:
            call.prompt[idx] = report.prompt_tokens
            held = ledger.first_report(
                call.held[idx], call.prompt[idx], call.decoded.get(idx, 0), report.block_size
            )
            call.tokens += held - call.held[idx]
            inst.tokens += held - call.held[idx]
            call.held[idx] = held
        if report.used_blocks is not None:
            inst.tokens += ledger.rebase(report.used_blocks)
        if inst.tokens < before and self.ctx.waiting(inst):  # room opened: a waiting call may fit now
            self.ctx.kick()

    def _drop(self, call: RunningCall) -> None:
        calls = self.calls.get(call.inst)
        e = call.pick.entry
        if calls is None or calls.get(e) is not call:
            return
        del calls[e]
        call.inst.outstanding -= len(call.sent)
        call.inst.tokens -= call.tokens
        if self.live:
            ledger = self.ledger(call.inst)
            call.inst.tokens += ledger.left(sum(call.held[j] for j in call.prompt))
            if not calls:
                call.inst.tokens += ledger.emptied()
        self.ctx.running.count(call.inst, [(e, 0, len(call.sent))], -1)

    def _deliver(self, call: RunningCall, finals: list[Any]) -> None:
        e = call.pick.entry
        resumes = self.resumes.pop(e, None)
        if resumes is None:
            results = list(finals)
        else:
            results = [r.final for r in resumes]
            for i, result in zip(call.sent, finals):
                results[i] = joined(resumes[i], result)
        t = self.ctx.loop.time()
        if call.items is not None:
            call.items.ended(text_of(results[0]), t)
        if e.op == STREAM_OP:
            e.work.final(results[0], t)
        else:
            e.work.results(0, results, t)
        self.ctx.observe([call.pick], call.started, t, results)

    # ---- choosing victims -----------------------------------------------------------------------
    def check(self, inst: Instance) -> int:
        """Preempt the calls on `inst` that the policy says waiting calls should displace."""
        calls = self.calls.get(inst)
        if not calls:
            return 0
        waiting = [e for e in self.ctx.waiting(inst) if e.op in DECODE_OPS]
        running = [e for e, c in calls.items() if not c.stopping]
        victims = self.ctx.policy().victims(
            running, waiting, self.free(inst), self.ctx.loop.time(), room=self.room(inst, calls, waiting)
        )
        for e in victims:
            call = calls[e]
            call.stopping = True
            self.ctx.spawn(stop_call(self.ctx, call))
        return len(victims)

    def room(
        self, inst: Instance, calls: dict[Pending, RunningCall], waiting: list[Pending]
    ) -> KVRoom | None:
        """What `inst` can still admit, for victims under `can_fit` (None without live admission or a
        token budget): its seats and tokens left, counting calls already stopping as gone."""
        if not (self.live and self.token_budget):
            return None
        leaving = [c for c in calls.values() if c.stopping]
        pad = self.ledger(inst).headroom_change()
        return KVRoom(
            seats=self.budget - self.running(inst) + sum(len(c.requests) for c in leaving),
            tokens=self.token_budget - inst.tokens + sum(c.tokens for c in leaving),
            held={e: c.tokens for e, c in calls.items() if not c.stopping},
            need={
                e: sum(e.tokens[e.taken :]) + pad * (len(e.tokens) - e.taken) if e.tokens else 0
                for e in waiting
            },
        )

    def cancel(self, entry: Pending) -> bool:
        """Stop `entry`'s running call for good (its caller went away): aborted in the engine, its KV
        not saved, not resumed. False if it is not running here."""
        self.resumes.pop(entry, None)
        for calls in self.calls.values():
            call = calls.get(entry)
            if call is not None:
                call.stopping = False  # an abort that is not a preemption: the call ends here
                self.ctx.spawn(stop_call(self.ctx, call, cancel=True))
                return True
        return False

    def cancel_owner(self, owner: str) -> dict[Instance, list[str]]:
        """The running calls of `owner` (a query that ended) end for good when the engine aborts
        the owner's requests: none is resumed. Returns their KV swap keys by instance, for the
        abort to tell the engine not to save them."""
        keys: dict[Instance, list[str]] = {}
        for inst, calls in self.calls.items():
            for e, call in calls.items():
                if e.query_id == owner:
                    call.stopping = False
                    self.resumes.pop(e, None)
                    if swap_keys(call.requests):
                        keys.setdefault(inst, []).extend(swap_keys(call.requests))
        return keys

    def forget(self, entry: Pending, instances: list[Instance]) -> None:
        """A waiting call was withdrawn: drop its resume state, and the KV an engine saved for its
        preempted requests (they never resume)."""
        resumes = self.resumes.pop(entry, None) or []
        keys = swap_keys([r.request for r in resumes if r.count])
        if not keys:
            return
        for inst in instances:
            if Capability.FORGET_KV in inst.capabilities:
                self.ctx.spawn(forget_kv_on(self.ctx, inst, keys))

    def note_resumed(self, result: Any) -> None:
        """Count what a resumed run re-sent and what the prefix cache held of it. A run stopped again
        before the engine computed anything for it (aborted with no token out, nothing cached or
        loaded: it was still waiting inside the engine) re-sent nothing to compute; it is counted
        as `resumed_unrun` instead."""
        if not isinstance(result, dict):
            return
        if result.get("aborted") and not any(
            int(result.get(k) or 0) > 0
            for k in ("num_output_tokens", "num_cached_tokens", "kv_swap_loaded_tokens")
        ):
            self.ctx.metrics.resumed_unrun += 1
            return
        m = self.ctx.metrics
        m.resumed_tokens += int(result.get("num_prompt_tokens") or 0)
        m.resumed_cached_tokens += int(result.get("num_cached_tokens") or 0)
        m.resumed_swapped_tokens += int(result.get("kv_swap_loaded_tokens") or 0)
