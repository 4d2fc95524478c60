"""LAMPS (../shared/papers/lamps.md, Algorithm 1): waiting LLM calls ranked by their predicted
memory over time, with the handling of their API call chosen to waste the least memory, and a
starvation counter.

Per waiting call the policy predicts (`predict`): its output length before the API call (the
request's "predicted_tokens" if a predictor set it, else its max_tokens) and, when the request
names the tool it will call ("api": tool name), the API's duration from an online mean per tool
(`observe_api`, seeded by `api_defaults`) and the tokens decoded after it ("post_tokens"). It picks
the handling by INFERCEPT's waste equations (teola.programs.api_handling) and scores the
call by its memory over time under that handling; lower scores run first.

A call resuming on KV its paused call preserved goes first (`base.resumes_preserved`: INFERCEPT
keeps a preserved request in the running batch; LAMPS' eq. 1 counts preserve's waste over the API's
duration only).

Starvation (LAMPS §4.4): every scheduling round a call stays waiting its counter grows; at
`starvation` rounds (100 in the paper) its *request* is marked starving and goes ahead of the
ranking until the request completes ("prioritization continues until request completion"): the
segments of one pausing call share a "kv_key" (`request_key`), so its continuations after later API
calls go ahead too, and the mark ends when its last segment (a call with neither "api" nor
"pause_kv") is scheduled or its program ends (`end_program`). A call without a kv_key is its own
request. The counter is per call: it resets when the call is scheduled and starts at 0 for a
continuation (§4.4: a request not prioritized resets when it reaches an API call). Scores are cached
and recomputed every `refresh` rounds (1 = every round; the paper uses 10 for long-running datasets).

`schedule` is pure: it reads the queue and keeps only the policy's own counters.
"""
from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from teola.programs.api_handling import ApiCall, choose_handling, memory_over_time
from teola.policies.base import (Decision, Limits, PauseModel, Pending, Policy, RequestQueue, fill_in_order,
                                 resumes_preserved)


def request_key(e: Pending) -> Hashable:
    """The request `e`'s call belongs to: (program, "kv_key") when its request names one (the
    segments of one pausing call share it: teola.api.tool_calls, `bench.sim_studies --study lamps`), else
    `e` itself."""
    req = e.requests[e.taken] if e.taken < len(e.requests) else e.requests[-1]
    key = req.get("kv_key")
    return e if key is None else (e.query_id, key)


def is_last_segment(e: Pending) -> bool:
    """Whether `e`'s call is its request's last: it names no API call ("api") and no handling of a
    pause ("pause_kv")."""
    req = e.requests[e.taken] if e.taken < len(e.requests) else e.requests[-1]
    return not req.get("api") and not req.get("pause_kv")


class LAMPSPolicy(Policy):
    name = "lamps"
    # admission control without preemption: at most the engine's max efficient batch of calls run in
    # the engine (teola.runtime.engine_tier.preemption), so this ranking, not the engine's arrival order, decides
    preemptive = True
    wants_progress = False  # running calls are never charged: no per-token progress events

    def __init__(self, starvation: int = 100, refresh: int = 1, step_s: float = 0.02, fwd_s_per_token: float = 1e-4,
                 swap_s_per_token: float | None = None, api_defaults: dict[str, float] | None = None,
                 batch_size: int | None = None) -> None:
        """step_s: seconds of one decode iteration; fwd_s_per_token: prefill seconds per context token
        (recompute cost); swap_s_per_token: seconds to move one token's KV one way (None: no swap on
        this engine); api_defaults: tool -> expected seconds before any is observed; batch_size: the
        profiled number of calls in a batch: the handling then counts the context of the batch's other
        calls, (batch_size - 1) x the mean context of the calls admitted so far (LAMPS §3.2.1); None:
        the call is alone."""
        if not isinstance(starvation, int) or starvation < 1:
            raise ValueError(f"lamps: starvation must be an int >= 1 (scheduling rounds), got {starvation!r}")
        if not isinstance(refresh, int) or refresh < 1:
            raise ValueError(f"lamps: refresh must be an int >= 1 (rounds between score updates), got {refresh!r}")
        if not step_s > 0 or fwd_s_per_token < 0 or (swap_s_per_token is not None and swap_s_per_token < 0):
            raise ValueError("lamps: step_s must be > 0 and the per-token costs >= 0")
        self.starvation = starvation
        self.refresh = refresh
        self.step_s = step_s
        self.fwd_s = fwd_s_per_token
        self.swap_s = swap_s_per_token
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"lamps: batch_size must be an int >= 1 (calls per batch) or None, got {batch_size!r}")
        self.batch_size = batch_size
        self._context = (0.0, 0)  # running mean of admitted calls' tokens, count
        self.api_mean: dict[str, tuple[float, int]] = {k: (float(v), 0) for k, v in (api_defaults or {}).items()}
        self.counters: dict[Pending, int] = {}
        self.starving: set[Hashable] = set()  # request keys (`request_key`) marked starving
        self.scores: dict[Pending, float] = {}
        self.handling: dict[Pending, str] = {}
        self.rounds = 0

    def progress(self, e: Pending, decoded: int) -> None:
        """Running calls are never demoted or preempted (LAMPS ranks waiting calls only)."""

    # ---- predictions --------------------------------------------------------------------------------
    def observe_api(self, tool: str, seconds: float) -> None:
        """An API call of `tool` took `seconds`: update its running mean."""
        mean, n = self.api_mean.get(tool, (0.0, 0))
        self.api_mean[tool] = ((mean * n + seconds) / (n + 1), n + 1)

    def predict(self, e: Pending) -> ApiCall:
        req: dict[str, Any] = e.requests[e.taken] if e.taken < len(e.requests) else e.requests[-1]
        prompt = int(e.tokens[0]) - int(req.get("max_tokens") or 0) if e.tokens else 0
        pre = int(req.get("predicted_tokens") or req.get("max_tokens") or 1)
        tool = req.get("api")
        if not tool:
            return ApiCall(max(0, prompt), pre)
        api_s = self.api_mean.get(str(tool), (1.0, 0))[0]
        return ApiCall(max(0, prompt), pre, api_s, int(req.get("api_response_tokens") or 0),
                       int(req.get("post_tokens") or 0))

    def pause_costs(self) -> PauseModel:
        """LAMPS's own costs decide a pause's handling: its per-token costs, per-tool means, batch."""
        return PauseModel(self.fwd_s, self.swap_s, {k: m for k, (m, _) in self.api_mean.items()},
                          self.other_context())

    def other_context(self) -> int:
        """Predicted context (tokens) of the other calls in a batch with this one."""
        if self.batch_size is None:
            return 0
        return int((self.batch_size - 1) * self._context[0])

    def score(self, e: Pending, other_context: int | None = None) -> tuple[float, str]:
        other_context = self.other_context() if other_context is None else other_context
        call = self.predict(e)
        context = call.prompt + call.pre
        fwd = self.fwd_s * context
        swap = None if self.swap_s is None else self.swap_s * context
        handling = "none" if call.api_s is None else choose_handling(call.api_s, context, other_context, fwd,
                                                                     swap)
        return memory_over_time(call, handling, self.step_s, fwd, swap or 0.0), handling

    # ---- scheduling ---------------------------------------------------------------------------------
    def schedule(self, queue: RequestQueue, now: float, limits: Limits) -> Decision:
        if not queue:
            return Decision()
        entries = list(queue)
        self.rounds += 1
        stale = (self.rounds - 1) % self.refresh == 0
        for e in entries:
            if stale or e not in self.scores:
                self.scores[e], self.handling[e] = self.score(e)
        ranked = sorted(entries, key=lambda e: (not resumes_preserved(e), request_key(e) not in self.starving,
                                                self.scores[e], e.arrival))
        fill = fill_in_order(ranked, limits)
        picked = {p.entry for p in fill.picks}
        for e in picked:
            if e.tokens:
                mean, n = self._context
                self._context = ((mean * n + float(e.tokens[0])) / (n + 1), n + 1)
        self._count(entries, picked)
        return Decision(fill.picks)

    def _count(self, entries: list[Pending], picked: set[Pending]) -> None:
        """Algorithm 1 lines 17-31: reset the picked, age the rest, mark the starving (a request's
        mark lasts until its last segment is scheduled)."""
        live = set(entries)
        for e in list(self.counters):
            if e not in live:
                self._forget(e)
        for e in entries:
            if e in picked:
                self.counters[e] = 0
                key = request_key(e)
                if key is e or is_last_segment(e):
                    self.starving.discard(key)
                continue
            self.counters[e] = self.counters.get(e, 0) + 1
            if self.counters[e] >= self.starvation:
                self.starving.add(request_key(e))
                self.counters[e] = 0

    def end_program(self, pid: str) -> None:
        """Program `pid` ended: its requests' starvation marks go (their last segments may not have
        said they were last)."""
        self.starving = {k for k in self.starving if not (isinstance(k, tuple) and k[0] == pid)}

    def _forget(self, e: Pending) -> None:
        self.counters.pop(e, None)
        self.scores.pop(e, None)
        self.handling.pop(e, None)
        self.starving.discard(e)
