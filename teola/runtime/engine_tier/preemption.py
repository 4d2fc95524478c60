"""Preemptive LLM calls under a program policy (Autellix §4) on an unpatched vLLM.

With a policy whose `preemptive` is true (mlfq, plas, atlas by default), the engine scheduler runs
each single-request decoding call as its own engine stream instead of a batch (vLLM batches
running requests continuously anyway) and:
  - admission: at most `budget` calls run on an instance at once (the engine's max_batch, vLLM's
    max_num_seqs; or its max efficient batch with `Engine(admission="efficient_batch")`), and no new
    one while the calls running there already hold the instance's `token_budget` (its KV cache, in
    the estimated tokens of prompt + output budget; the call that overflows it is the last one in),
    so the policy's order, not vLLM's arrival order, decides who runs;
  - service while running: the call's decoded-token count and its seconds on the engine stream
    back ("progress") and the policy charges them as they grow (`policy.progress`), so a long call
    is demoted while it runs (a policy with `wants_progress = False`, which never charges running
    calls, gets no progress events);
  - preemption: every `rerank_every` progress events, and whenever work arrives at a full instance,
    `policy.victims` names running calls of a worse queue than waiting ones; each is aborted in the
    engine (by its request tag), returns the token ids it decoded, and waits in the queue again;
    when picked it resumes as prompt + those token ids (the prefix cache holds most of them, or, on
    an engine with kv_swap, host memory: each call carries a "kv_swap_key" that survives its
    resumes) with the remaining max_tokens, and its final text is the parts joined;
  - cancellation: a call whose caller went away is stopped for good through the adapter's
    `cancel(tags, kv_keys)` where it has one, which tells a kv_swap engine not to save its KV (it
    never resumes), and a waiting preempted call's saved KV is dropped (`forget_kv`).
An engine that does not report `output_token_ids` is never preempted mid-call (no way to resume).
Batched decodes (several requests in one entry) and partial decodes run to their end: see
docs/program_scheduling.md, "Deviations from Autellix".
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

from teola.policies.base import Pending, Pick, RequestQueue
from teola.runtime.engine_tier.engine_context import EngineContext
from teola.runtime.engine_tier.supervisor import down_error
from teola.runtime.executors.executor import Instance, checked_results

log = logging.getLogger("teola.runtime")
OP = "decoding"


@dataclass(slots=True, eq=False)
class RunningCall:
    inst: Instance
    pick: Pick
    queue: RequestQueue
    request: dict[str, Any]
    tokens: int
    started: float
    stopping: bool = False
    events: int = 0


@dataclass(slots=True)
class Resume:
    """What a preempted call carries to its next run."""

    request: dict[str, Any]          # the call's original request
    ids: list[int] = field(default_factory=list)
    text: str = ""
    count: int = 0
    points: list[int] = field(default_factory=list)  # tokens decoded when each preemption hit


class Preemptor:
    """The preemptive side of one LLM engine scheduler (see the module docstring)."""

    def __init__(self, ctx: EngineContext, budget: int, token_budget: int = 0) -> None:
        self.ctx = ctx
        self.budget = max(1, budget)
        self.token_budget = max(0, token_budget)
        self.calls: dict[Instance, dict[Pending, RunningCall]] = {}
        self.resumes: dict[Pending, Resume] = {}
        self._tags = itertools.count()

    @staticmethod
    def applies(op: str, picks: list[Pick]) -> bool:
        return op == OP and all(len(p.entry.requests) == 1 and p.count == 1 for p in picks)

    def running(self, inst: Instance) -> int:
        return len(self.calls.get(inst, ()))

    def free(self, inst: Instance) -> int:
        """Admission slots left on `inst`: none while the calls running there fill its token budget."""
        running = self.running(inst)
        if running and self.token_budget and inst.tokens >= self.token_budget:
            return 0
        return self.budget - running

    # ---- running calls --------------------------------------------------------------------------
    def start(self, inst: Instance, pick: Pick, queue: RequestQueue, tokens: int) -> None:
        """Run the call of `pick` (already taken from `queue`) on `inst` as its own stream."""
        ctx = self.ctx
        e = pick.entry
        req = e.requests[0]
        req["tag"] = f"{ctx.name}:call{next(self._tags)}"
        # names the call's KV across its resumes: an engine with kv_swap saves it on preemption
        req.setdefault("kv_swap_key", req["tag"])
        if ctx.policy().wants_progress:  # lamps / sjf never charge running calls
            req["progress"] = True
        call = RunningCall(inst, pick, queue, req, tokens, ctx.loop.time())
        self.calls.setdefault(inst, {})[e] = call
        inst.outstanding += 1
        inst.tokens += tokens
        ctx.running.count(inst, [(e, 0, 1)], 1)
        ctx.metrics.observe_batch(ctx.name, 1)
        e.work.started(inst, ctx.next_batch(), 1, call.started)
        ctx.spawn(self._run(call))

    async def _run(self, call: RunningCall) -> None:
        ctx, inst, e = self.ctx, call.inst, call.pick.entry
        try:
            try:
                final = await self._outcome(call)
            finally:
                self._drop(call)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.resumes.pop(e, None)
            e.work.failed(exc if await ctx.alive(inst, exc) else down_error(ctx.name, inst, exc), inst)
            ctx.kick()
            return
        if call.request.get("resume_ids"):
            self.note_resumed(final)
        if not (call.stopping and isinstance(final, dict) and final.get("aborted") and self._requeue(call, final)):
            self._deliver(call, final)
        ctx.kick()

    async def _outcome(self, call: RunningCall) -> Any:
        """Run the call on its instance (streamed when the adapter can, so progress and text deltas
        arrive as it decodes); its final result."""
        ctx, e = self.ctx, call.pick.entry
        if not ctx.executor.supports(call.inst, "stream"):  # no progress: it runs to its end
            results = await ctx.executor.execute(call.inst, OP, [call.request])
            return checked_results(ctx.name, results, 1)[0]
        final: Any = None
        async for _, kind, payload in ctx.executor.stream(call.inst, OP, [call.request]):
            if kind == "progress":
                self._progress(call, payload)
            elif kind == "delta":
                e.work.delta(payload, ctx.loop.time())
            elif kind == "final":
                final = payload
        if final is None:
            raise RuntimeError(f"engine {ctx.name!r} ended a call's stream without a final result")
        return final

    def _progress(self, call: RunningCall, decoded: Any) -> None:
        policy = self.ctx.policy()
        if not isinstance(decoded, int):
            return
        policy.progress(call.pick.entry, decoded, self.ctx.loop.time() - call.started)
        call.events += 1
        if call.events % policy.rerank_every == 0:
            self.check(call.inst)

    def _drop(self, call: RunningCall) -> None:
        calls = self.calls.get(call.inst)
        e = call.pick.entry
        if calls is None or calls.get(e) is not call:
            return
        del calls[e]
        call.inst.outstanding -= 1
        call.inst.tokens -= call.tokens
        self.ctx.running.count(call.inst, [(e, 0, 1)], -1)

    def _deliver(self, call: RunningCall, result: Any) -> None:
        e = call.pick.entry
        resume = self.resumes.pop(e, None)
        if resume is not None and isinstance(result, dict):
            result = dict(result, text=resume.text + str(result.get("text", "")),
                          num_output_tokens=len(resume.ids) + int(result.get("num_output_tokens") or 0),
                          output_token_ids=resume.ids + list(result.get("output_token_ids") or []),
                          preemptions=resume.count, resumed_at=list(resume.points))
        t = self.ctx.loop.time()
        e.work.results(0, [result], t)
        self.ctx.observe([call.pick], call.started, t, [result])

    def _requeue(self, call: RunningCall, partial: dict[str, Any]) -> bool:
        """Put a preempted call back in its queue to resume later; False if it cannot resume (the
        engine gave no token ids, or nothing is left to decode: then `partial` is its result)."""
        ids = partial.get("output_token_ids")
        e = call.pick.entry
        resume = self.resumes.get(e) or Resume(dict(call.request))
        if not isinstance(ids, list) or int(resume.request.get("max_tokens") or 0) - len(resume.ids) - len(ids) <= 0:
            return False
        self.resumes[e] = resume
        resume.ids += ids
        resume.text += str(partial.get("text", ""))
        resume.count += 1
        resume.points.append(len(resume.ids))
        self.ctx.metrics.preemptions += 1
        req = {k: v for k, v in resume.request.items() if k not in ("tag", "progress")}
        req.update(resume_ids=list(resume.ids), max_tokens=int(resume.request["max_tokens"]) - len(resume.ids))
        e.requests[0] = req
        e.taken = 0
        self.ctx.policy().preempted(call.pick)
        call.queue.push(e)
        return True

    # ---- choosing victims -----------------------------------------------------------------------
    def check(self, inst: Instance) -> int:
        """Preempt the calls on `inst` that the policy says waiting calls should displace."""
        calls = self.calls.get(inst)
        if not calls:
            return 0
        waiting = [e for e in self.ctx.waiting(inst) if e.op == OP]
        running = [e for e, c in calls.items() if not c.stopping]
        victims = self.ctx.policy().victims(running, waiting, self.free(inst), self.ctx.loop.time())
        for e in victims:
            call = calls[e]
            call.stopping = True
            self.ctx.spawn(self._stop(call))
        return len(victims)

    def cancel(self, entry: Pending) -> bool:
        """Stop `entry`'s running call for good (its caller went away): aborted in the engine, its KV
        not saved, not resumed. False if it is not running here."""
        self.resumes.pop(entry, None)
        for calls in self.calls.values():
            call = calls.get(entry)
            if call is not None:
                call.stopping = False  # an abort that is not a preemption: the call ends here
                self.ctx.spawn(self._stop(call, cancel=True))
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
                    if call.request.get("kv_swap_key"):
                        keys.setdefault(inst, []).append(call.request["kv_swap_key"])
        return keys

    def forget(self, entry: Pending, instances: list[Instance]) -> None:
        """A waiting call was withdrawn: drop its resume state, and the KV an engine saved for it
        when it was preempted (it never resumes)."""
        resume = self.resumes.pop(entry, None)
        key = resume.request.get("kv_swap_key") if resume is not None else None
        if not key:
            return
        for inst in instances:
            if self.ctx.executor.supports(inst, "forget_kv"):
                self.ctx.spawn(self._forget_on(inst, key))

    async def _forget_on(self, inst: Instance, key: str) -> None:
        try:
            await self.ctx.executor.call(inst, "forget_kv", [key])
        except Exception as exc:  # the saved copy then waits for its least-recently-used drop
            log.warning("engine %s: dropping the saved KV of a withdrawn call failed: %s: %s", inst.name,
                        type(exc).__name__, exc)

    async def _stop(self, call: RunningCall, cancel: bool = False) -> None:
        key = call.request.get("kv_swap_key")
        try:
            if cancel and key and self.ctx.executor.supports(call.inst, "cancel"):
                await self.ctx.executor.call(call.inst, "cancel", [call.request["tag"]], [key])
            else:
                await self.ctx.executor.call(call.inst, "abort", [call.request["tag"]])
        except Exception as exc:  # the call then runs to its end: only the engine time is lost
            call.stopping = False
            log.warning("engine %s: stopping call %s failed: %s: %s", call.inst.name, call.pick.entry.name,
                        type(exc).__name__, exc)
            return
        if not call.stopping:
            self.ctx.metrics.aborted_requests += 1

    def note_resumed(self, result: Any) -> None:
        """Count what a resumed run re-sent and what the prefix cache held of it. A run stopped again
        before the engine computed anything for it (aborted with no token out, nothing cached or
        loaded: it was still waiting inside the engine) re-sent nothing to compute; it is counted
        as `resumed_unrun` instead."""
        if not isinstance(result, dict):
            return
        if result.get("aborted") and not any(int(result.get(k) or 0) > 0 for k in (
                "num_output_tokens", "num_cached_tokens", "kv_swap_loaded_tokens")):
            self.ctx.metrics.resumed_unrun += 1
            return
        m = self.ctx.metrics
        m.resumed_tokens += int(result.get("num_prompt_tokens") or 0)
        m.resumed_cached_tokens += int(result.get("num_cached_tokens") or 0)
        m.resumed_swapped_tokens += int(result.get("kv_swap_loaded_tokens") or 0)
