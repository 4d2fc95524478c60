"""LAMPS (../shared/papers/lamps.md, Algorithm 1): waiting LLM calls ranked by their predicted
memory over time, with the handling of their API call chosen to waste the least memory, and a
starvation counter.

Per waiting call the policy predicts (`predict`): its output length before the API call (the
record's `predicted_tokens` if a predictor gave one, else its max_tokens) and, when the call pauses
for an API (it names the tool it will call, "api", or a handling, "pause_kv"), the API's duration
(`api_handling.api_seconds` over an online mean per tool, `observe_api`, seeded by `api_defaults`)
and the tokens decoded after it ("post_tokens"). It scores the call by its memory over time under
the handling applied to it: its dispatch record's `pause_kv` (fixed by the caller, or "auto" resolved by the
engine's scheduler when the call is queued, after its length prediction, with this policy's own
costs and the same predicted context: teola.scheduling.program.pause_handling), so the handling a call is
ranked under is the one it gets (Algorithm 1 lines 4-5 and 14). A call naming an API but no
handling is scored under the handling INFERCEPT's waste equations pick
(teola.scheduling.program.api_handling). Lower scores run first.

A call resuming on KV its paused call preserved is ranked like any other call (LAMPS Algorithm 1
sorts every request by its score); `preserved_first=True` (a named option) sends it first instead
(`base.resumes_preserved`: INFERCEPT keeps a preserved request in the running batch).

The running batch is rebuilt by score each iteration (Algorithm 1; `preempt`, default true): at every
progress event (one per engine iteration, `rerank_every = 1`) and when work arrives at a full
instance, each waiting call beyond the instance's free slots (none while the running calls fill its
KV token budget: memory is short) displaces the running call of the worst rank if its own rank is
better (`victims`). A running call is ranked by its remaining work: its admitted shape with the
tokens it decoded moved from the output to the context. `C_other` (the context of the other calls
in a batch, which the handling of a pause weighs) is by default the running batch's: the summed
estimated tokens of the calls admitted and not ended (`batch_size="running"`).

Starvation (LAMPS §4.4) counts engine iterations: a waiting call's counter is the number of engine
iterations since it was first seen waiting (or last reset), and it runs only once LAMPS has scheduled
the call's request (`starvation_from="scheduled"`, the default: §4.4, "the starvation prevention
mechanism activates only when LAMPS initially schedules the request to the running queue, thus
leveraging LAMPS's sorting decisions"), so a request's first call is admitted in LAMPS' order alone
and only its continuations after an API call (or a call left waiting after part of it ran) count;
`starvation_from="seen"` (off by default) counts every waiting call from when it is first seen, the
literal reading of Algorithm 1 lines 21-31, which leave the activation out. At `starvation`
iterations (100 in the paper) its *request* is marked starving and goes ahead of the ranking until
the request completes ("prioritization continues until request completion"): the segments of one pausing call
share a "kv_key" (`request_key`), so its continuations after later API calls go ahead too, and the mark ends
when its last segment (a call with neither "api" nor "pause_kv") is scheduled or its program ends
(`end_program`). A call without a kv_key is its own request. The counter resets when the call is
scheduled and starts at 0 for a continuation (§4.4: a request not prioritized resets when it reaches
an API call). The iteration clock (`iterations`) is read from the running calls' decoded tokens
(`progress`, and `observe` when a call ends): every engine iteration decodes one token of each
running call, so the clock is the most tokens any call has decoded past the clock's value when it was
admitted; iterations that only prefill, or that run while no admitted call decodes, are not counted
(docs/program_scheduling.md). Scores are cached and recomputed every `refresh` scheduling rounds
(1 = every round; the paper uses 10 for long-running datasets).

`schedule` is pure: it reads the queue and keeps only the policy's own counters.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from teola.scheduling.base import (
    Decision,
    Limits,
    PauseModel,
    Pending,
    Pick,
    Policy,
    RequestQueue,
    fill_in_order,
    resumes_preserved,
)
from teola.scheduling.kv_room import KVRoom
from teola.scheduling.program.api_handling import (
    HANDLINGS,
    ApiCall,
    api_seconds,
    choose_handling,
    memory_over_time,
    predicted_shape,
)
from teola.scheduling.program.lamps_options import check_options


def request_key(e: Pending) -> Hashable:
    """The request `e`'s call belongs to: (program, "kv_key") when its request names one (the
    segments of one pausing call share it: teola.api.tool_calls, `bench.sim_studies --study lamps`), else
    `e` itself."""
    key = e.requests[e.head].get("kv_key")
    return e if key is None else (e.query_id, key)


def is_last_segment(e: Pending) -> bool:
    """Whether `e`'s call is its request's last: it names no API call ("api") and its record no
    handling of a pause (`pause_kv`)."""
    i = e.head
    return not e.requests[i].get("api") and not e.records[i].pause_kv


class LAMPSPolicy(Policy):
    name = "lamps"
    # admission control without preemption: at most the engine's max efficient batch of calls run in
    # the engine (teola.runtime.engine_tier.preemption), so this ranking, not the engine's arrival
    # order, decides
    preemptive = True
    # running calls are never charged; their decoded tokens only drive the iteration clock
    wants_progress = True
    rerank_every = 1  # a victim check every progress event: the batch is rebuilt each iteration

    def __init__(
        self,
        starvation: int = 100,
        refresh: int = 1,
        step_s: float = 0.02,
        fwd_s_per_token: float = 1e-4,
        swap_s_per_token: float | None = None,
        api_defaults: dict[str, float] | None = None,
        batch_size: int | str | None = "running",
        starvation_from: str = "scheduled",
        preempt: bool = True,
        preserved_first: bool = False,
        rerank_every: int = 1,
    ) -> None:
        """step_s: seconds of one decode iteration; fwd_s_per_token: prefill seconds per context token
        (recompute cost); swap_s_per_token: seconds to move one token's KV one way (None: no swap on
        this engine); api_defaults: tool -> expected seconds before any is observed; batch_size: the
        profiled number of calls in a batch: the handling then counts the context of the batch's other
        calls, (batch_size - 1) x the mean context of the calls admitted so far (LAMPS §3.2.1);
        "measured": the batch size profiled online, the mean number of calls running at each
        admission (admitted and not yet ended); "running" (default): the summed tokens of the calls
        running now; None: the call is alone. preempt: rebuild the running batch by score (the module
        docstring); rerank_every: progress events between two such checks (1: every iteration, as
        Algorithm 1). preserved_first: a call resuming on preserved KV goes first. starvation_from:
        "scheduled" (a request's starvation counter runs once LAMPS has scheduled the request, LAMPS §4.4) or
        "seen" (from when a call is first seen waiting: the module docstring)."""
        check_options(
            starvation=starvation,
            refresh=refresh,
            step_s=step_s,
            fwd_s_per_token=fwd_s_per_token,
            swap_s_per_token=swap_s_per_token,
            starvation_from=starvation_from,
            preempt=preempt,
            preserved_first=preserved_first,
            rerank_every=rerank_every,
            batch_size=batch_size,
        )
        self.starvation = starvation
        self.starvation_from = starvation_from
        self.refresh = refresh
        self.step_s = step_s
        self.fwd_s = fwd_s_per_token
        self.swap_s = swap_s_per_token
        self.preempt = preempt
        self.rerank_every = rerank_every
        self.preserved_first = preserved_first
        self.batch_size = batch_size
        self.api_mean: dict[str, tuple[float, int]] = {
            k: (float(v), 0) for k, v in (api_defaults or {}).items()
        }
        self._start_bookkeeping()

    def _start_bookkeeping(self) -> None:
        """What LAMPS keeps per call as it runs: admitted calls' mean context, the iteration clock,
        waiting and running calls' counters, shapes and scores, and the request keys it has scheduled."""
        self._context = (0.0, 0)  # running mean of admitted calls' tokens, count
        self._running = (0.0, 0)  # running mean of the calls running after each admission, count
        self.iterations = 0  # engine iterations seen so far (the module docstring)
        self.waiting_since: dict[Pending, int] = {}  # waiting call -> `iterations` when its counter was 0
        self.admitted_at: dict[Pending, int] = {}  # running call -> `iterations` when it was admitted
        self.shapes: dict[
            Pending, tuple[ApiCall, str, int]
        ] = {}  # running call -> (shape, handling, decoded)
        self.starving: set[Hashable] = set()  # request keys (`request_key`) marked starving
        self.scheduled: set[Hashable] = set()  # request keys LAMPS has scheduled (their counters run)
        self.scores: dict[Pending, float] = {}
        self.handling: dict[Pending, str] = {}
        self.rounds = 0

    # ---- the iteration clock ------------------------------------------------------------------------
    def counter(self, e: Pending) -> int:
        """Engine iterations waiting call `e` has waited since its counter was last 0 (0 while its
        counter does not run: `counts`)."""
        if not self.counts(e):
            return 0
        return self.iterations - self.waiting_since.get(e, self.iterations)

    def counts(self, e: Pending) -> bool:
        """Whether waiting call `e`'s starvation counter runs: always under `starvation_from="seen"`,
        else once LAMPS has scheduled its request (LAMPS §4.4)."""
        return self.starvation_from == "seen" or request_key(e) in self.scheduled

    def progress(self, e: Pending, decoded: int, elapsed: float | None = None) -> None:
        """Running call `e` has decoded `decoded` tokens: as many engine iterations ran since it was
        admitted. Running calls are never demoted or preempted (LAMPS ranks waiting calls only)."""
        since = self.admitted_at.get(e)
        if since is not None:
            self.iterations = max(self.iterations, since + decoded)
        shape = self.shapes.get(e)
        if shape is not None:
            self.shapes[e] = (shape[0], shape[1], decoded)

    def observe(self, picks: list[Pick], started: float, finished: float, results: list[Any] | None) -> None:
        """Calls ended: their decoded tokens advance the clock (an engine that streams no progress)."""
        for i, pick in enumerate(picks):
            result = results[i] if results is not None and i < len(results) else None
            if isinstance(result, dict) and isinstance(result.get("num_output_tokens"), int):
                self.progress(pick.entry, result["num_output_tokens"])
            self.admitted_at.pop(pick.entry, None)
            self.shapes.pop(pick.entry, None)

    def preempted(self, pick: Pick, now: float | None = None) -> None:
        """A running call was preempted: it waits again (ranked afresh when next scheduled)."""
        self.admitted_at.pop(pick.entry, None)
        self.shapes.pop(pick.entry, None)

    # ---- predictions --------------------------------------------------------------------------------
    def observe_api(self, tool: str, seconds: float) -> None:
        """An API call of `tool` took `seconds`: update its running mean."""
        mean, n = self.api_mean.get(tool, (0.0, 0))
        self.api_mean[tool] = ((mean * n + seconds) / (n + 1), n + 1)

    def predict(self, e: Pending) -> ApiCall:
        """The predicted shape of `e`'s next call: prompt and pre-API tokens (`predicted_shape`, as
        its "auto" handling was chosen from) and, when it pauses for an API, that API's duration."""
        i = e.head
        req = e.requests[i]
        prompt, pre = predicted_shape(
            e.budget(i),
            e.records[i].predicted_tokens,
            e.tokens[min(e.taken, len(e.tokens) - 1)] if e.tokens else None,
        )
        tool = req.get("api")
        if not tool and not e.records[i].pause_kv:
            return ApiCall(prompt, pre)
        api_s = api_seconds({k: m for k, (m, _) in self.api_mean.items()}, str(tool) if tool else None)
        return ApiCall(
            prompt, pre, api_s, int(req.get("api_response_tokens") or 0), int(req.get("post_tokens") or 0)
        )

    def pause_costs(self) -> PauseModel:
        """LAMPS's own costs decide a pause's handling: its per-token costs, per-tool means, batch."""
        return PauseModel(
            self.fwd_s, self.swap_s, {k: m for k, (m, _) in self.api_mean.items()}, self.other_context()
        )

    def other_context(self) -> int:
        """Predicted context (tokens) of the other calls in a batch with this one."""
        if self.batch_size is None:
            return 0
        if self.batch_size == "running":
            return sum(shape.prompt + shape.pre for shape, _, _ in self.shapes.values())
        calls = self._running[0] if self.batch_size == "measured" else self.batch_size
        return int(max(0.0, calls - 1) * self._context[0])

    def score(self, e: Pending, other_context: int | None = None) -> tuple[float, str]:
        """(memory over time, handling) of `e`'s next call: under the handling its request carries
        ("pause_kv"), else the least-waste one (the module docstring); "none" without an API call."""
        other_context = self.other_context() if other_context is None else other_context
        call = self.predict(e)
        context = call.prompt + call.pre
        fwd = self.fwd_s * context
        swap = None if self.swap_s is None else self.swap_s * context
        handling = "none"
        if call.api_s is not None:
            applied = e.records[e.head].pause_kv
            if applied not in HANDLINGS:
                applied = choose_handling(call.api_s, context, other_context, fwd, swap)
            handling = applied
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
        self._age(entries)
        ranked = sorted(entries, key=self._key)
        fill = fill_in_order(ranked, limits)
        picked = {p.entry for p in fill.picks}
        for e in picked:
            if e.tokens:
                mean, n = self._context
                self._context = ((mean * n + float(e.tokens[0])) / (n + 1), n + 1)
            self.admitted_at[e] = self.iterations
            self.shapes[e] = (self.predict(e), self.handling[e], 0)
            self.waiting_since[e] = self.iterations  # its counter resets (forgotten once it left the queue)
            key = request_key(e)
            self.scheduled.add(key)
            if key is e or is_last_segment(e):
                self.starving.discard(key)
                if key is not e:  # its last segment: the request completes (a call alone: `_forget`)
                    self.scheduled.discard(key)
        mean, n = self._running
        self._running = ((mean * n + len(self.admitted_at)) / (n + 1), n + 1)
        return Decision(picks=fill.picks)

    def _key(self, e: Pending, score: float | None = None) -> tuple:
        """A call's rank (lower first): preserved resumes first only with `preserved_first`, then
        starving requests, then by score and arrival."""
        first = self.preserved_first and resumes_preserved(e)
        return (
            not first,
            request_key(e) not in self.starving,
            self.scores[e] if score is None else score,
            e.arrival,
        )

    def running_score(self, e: Pending) -> float:
        """A running call's score over its remaining work: the `decoded` tokens of its admitted
        shape move from its output (`pre`) to its context (`prompt`)."""
        call, handling, decoded = self.shapes[e]
        d = min(decoded, call.pre)
        rest = ApiCall(call.prompt + d, call.pre - d, call.api_s, call.response, call.post)
        context = call.prompt + call.pre
        return memory_over_time(
            rest, handling, self.step_s, self.fwd_s * context, (self.swap_s or 0.0) * context
        )

    def victims(
        self,
        running: list[Pending],
        waiting: list[Pending],
        free: int,
        now: float,
        *,
        room: KVRoom | None = None,
    ) -> list[Pending]:
        """Algorithm 1's batch rebuilt by score: each waiting call, best first, beyond the `free`
        admission slots (0 while memory is short) displaces the worst-ranked running call if it
        ranks better. `room` is not read: memory reaches LAMPS as `free`."""
        if not self.preempt or not waiting or not running:
            return []
        for e in waiting:
            if e not in self.scores:
                self.scores[e], self.handling[e] = self.score(e)
        order = sorted(waiting, key=self._key)
        pool = sorted(
            ((self._key(e, self.running_score(e)), e) for e in running if e in self.shapes),
            key=lambda p: p[0],
            reverse=True,
        )
        out: list[Pending] = []
        for w in order[max(0, free) :]:
            if not pool or pool[0][0][:3] <= self._key(w)[:3]:
                break
            out.append(pool.pop(0)[1])
        return out

    def _age(self, entries: list[Pending]) -> None:
        """Algorithm 1 lines 21-31 per engine iteration: a call waiting `starvation` iterations
        marks its request starving and its counter restarts (the mark lasts until the request's last
        segment is scheduled). A call whose counter does not run yet (`counts`) stays at 0."""
        live = set(entries)
        for e in list(self.waiting_since):
            if e not in live:
                self._forget(e)
        for e in entries:
            self.waiting_since.setdefault(e, self.iterations)
            if not self.counts(e):
                self.waiting_since[e] = self.iterations
            elif self.counter(e) >= self.starvation:
                self.starving.add(request_key(e))
                self.waiting_since[e] = self.iterations

    def end_program(self, pid: str) -> None:
        """Program `pid` ended: its requests' starvation marks go (their last segments may not have
        said they were last)."""
        self.starving = {k for k in self.starving if not (isinstance(k, tuple) and k[0] == pid)}
        self.scheduled = {k for k in self.scheduled if not (isinstance(k, tuple) and k[0] == pid)}
        for e in [e for e in self.admitted_at if e.query_id == pid]:
            del self.admitted_at[e]
            self.shapes.pop(e, None)

    def _forget(self, e: Pending) -> None:
        self.waiting_since.pop(e, None)
        self.scores.pop(e, None)
        self.handling.pop(e, None)
        self.starving.discard(e)
        self.scheduled.discard(e)
