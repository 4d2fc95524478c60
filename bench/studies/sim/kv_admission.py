"""Admission bound by KV blocks for bench.studies.sim.sim_lamps (vLLM's rule: a waiting request is admitted
only when its blocks can be allocated), with the policy's order deciding who waits.

In LAMPS (and INFERCEPT) the scheduler's own waiting queue is what waits for KV: vLLM admits
from its head while blocks can be allocated, so the order of that queue (FCFS, or LAMPS' ranking)
decides who gets memory when it is short. teola's admission for `lamps` / `sjf` / `fcfs`
(teola.runtime.engine_tier.preemption) caps the number of calls in the engine, not their KV; with a cap above
what the KV holds, the surplus would wait in the engine's own arrival-order queue and every
policy would look the same. `KVAdmission` wraps the policy so teola sends calls only while the
simulated engine has free KV for them (`free_tokens`): the rest wait in teola's queue, ranked.
At most one call sent ahead waits in the engine (the first call of a batch always goes, so the
engine is never left idle with work queued).

A call that continues one whose KV the engine preserved during its API call goes first, whatever
the policy's order: INFERCEPT's preserve keeps the request in the running batch so it resumes as
its API returns, and the waste of preserving (LAMPS eq. 1, T_INT x C_i x M) counts the API's
duration only. Ranked behind other calls, its KV would stay pinned while it waits, which neither
paper models and which, once memory is short, leaves most of the KV held by paused calls. With
`kv_bound=False` only this rule applies (teola's admission then caps the number of calls only), which
teola's own fcfs / sjf / lamps now do from the request's `resumes_preserved` mark
(teola.scheduling.base): without it a continuation ranked behind new calls keeps its KV
pinned in teola's queue while the cap fills with calls the engine has no memory for, until almost
nothing runs (issue 18: LAMPS at 2.75 req/s on the INFERCEPT mix). Pure except for reading the
engine's pool and waiting list; it changes neither.
"""

from __future__ import annotations

from typing import Any

from teola.scheduling.base import Decision, Limits, Pending, Pick, RankedAdmission, RequestQueue
from teola.scheduling.registry import register_policy


def free_tokens(free_blocks: int, block_size: int, waiting: list[int]) -> int | None:
    """Tokens of KV teola may still send to the engine: the free blocks' tokens minus what the
    calls already waiting in the engine need (`waiting`: their context tokens). None: hold (calls
    wait in the engine and the free KV does not cover them); else at least 1, so an engine with
    nothing waiting always gets the next call."""
    left = free_blocks * block_size - sum(waiting)
    if waiting and left <= 0:
        return None
    return max(1, left)


class KVAdmission:
    """`policy` with its batches limited to the KV the engine `llm` (an engines.sim.llm.SimLLM)
    has free (see the module docstring); every other attribute is the policy's."""

    def __init__(self, policy: Any, llm: Any, kv_bound: bool = True) -> None:
        """kv_bound: also send calls only while the engine's free KV covers them (False: calls
        resuming on preserved KV go first, the rest is the policy's batch, unbounded by KV)."""
        self.policy, self.llm, self.kv_bound = policy, llm, kv_bound
        self.held = 0  # scheduling rounds held because the engine's KV was spoken for
        self.resumes = 0  # calls sent ahead of the policy's order to resume on their preserved KV

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)

    def resumed(self, queue: RequestQueue, limit: int) -> list[Pending]:
        """Queued calls that continue a call whose KV the engine preserved (at most `limit`)."""
        buckets = getattr(queue, "_buckets", None)
        out = []
        for key, paused in self.llm.paused.items():
            if paused.held is None or len(out) >= limit:
                continue
            waiting = buckets.get(key, ()) if buckets is not None else [e for e in queue if e.query_id == key]
            out += [e for e in waiting if e.remaining and e.requests[e.taken].get("kv_key") == key][:1]
        return out

    def schedule(self, queue: RequestQueue, now: float, limits: Limits) -> Decision:
        resumed = self.resumed(queue, limits.max_batch)
        if resumed:  # INFERCEPT's preserve: the call resumes as its API returns, on the KV it kept
            self.resumes += len(resumed)
            return Decision(picks=[Pick(entry=e, count=1) for e in resumed])
        if not self.kv_bound:
            return self.policy.schedule(queue, now, limits)
        pool = self.llm.pool
        free = free_tokens(pool.free, pool.block_size, [len(s.ids) for s in self.llm.waiting])
        if free is None:
            self.held += 1
            return Decision()
        tokens = free if not limits.token_budget else min(free, limits.token_budget)
        narrowed = Limits(
            max_batch=limits.max_batch, max_efficient_batch=limits.max_efficient_batch, token_budget=tokens
        )
        return self.policy.schedule(queue, now, narrowed)


class RequestOrderFCFS(RankedAdmission):
    """FCFS in the order of the calls' *requests* (the request's "request_arrival", else the
    call's own arrival), as vLLM orders its waiting queue by a sequence group's arrival time, which
    a request resumed after an API call (INFERCEPT) keeps: a continuation goes ahead of requests
    that arrived after its own. teola's `fcfs` orders by the time each call was queued instead, so
    a continuation waits behind every request that arrived during its API call."""

    name = "fcfs-request"

    def rank(self, e: Pending) -> tuple[float, float]:
        req = e.requests[e.taken] if e.taken < len(e.requests) else e.requests[-1]
        return float(req.get("request_arrival", e.arrival)), e.arrival


register_policy(RequestOrderFCFS.name, RequestOrderFCFS)
