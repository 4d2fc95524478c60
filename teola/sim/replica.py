"""Iteration-level simulation of one engine replica finishing a set of requests: the planner's inner
evaluation (SamuLLM's request scheduling simulator + per-iteration cost model).

It follows engines/sim/llm.py's scheduling (FCFS admission up to max_num_seqs, a token budget per
iteration shared by one token per decoding sequence and chunks of the prompts being prefilled, the
first output token sampled at the end of the prefill) and prices every iteration with the same
IterationCost, but it runs without an event loop and jumps over runs of decode-only iterations
between request completions in closed form (their cost is linear in the iteration count and the
growing context), so a replica of thousands of requests takes milliseconds. Prefix cache: a request
admitted after the replica's first iteration skips prefilling its `cached` leading tokens (the
prompt's blocks shared with the requests before it: chat template and instruction); the ones
admitted together at the start all prefill in full, as their shared blocks are not computed yet.
Simplifications: a request is admitted only when KV space for its whole prompt and output is free
(no preemption), and cached blocks still count in it. A request may become ready at a given time (its inputs
come from another model) or when its predecessor (`after`, a chain on the same replica) finishes.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

from engines.sim.cost import IterationCost


@dataclass(slots=True)
class SimRequest:
    """One request: prompt tokens, output tokens (`target`), tokens already decoded (`done`, carried
    over by a model that keeps running), ready time, a predecessor key on the same replica, and
    leading prompt tokens the prefix cache holds once the replica has run (`cached`)."""

    key: int
    prompt: int
    target: int
    ready: float = 0.0
    after: int | None = None
    done: int = 0
    cached: int = 0


@dataclass(slots=True)
class ReplicaResult:
    end: float  # seconds until the last request finished (or the horizon)
    finish: dict[int, float] = field(default_factory=dict)
    progress: dict[int, int] = field(
        default_factory=dict
    )  # decoded tokens of requests in flight at the horizon
    curve: list[tuple[float, float]] = field(
        default_factory=list
    )  # (time, cumulative prompt + output tokens)


@dataclass(slots=True)
class _Seq:
    req: SimRequest
    prefill_left: int
    prefilled: int = 0
    entry_g: int = 0
    entry_decoded: int = 0


def simulate_replica(
    reqs: list[SimRequest],
    cost: IterationCost,
    max_num_seqs: int,
    budget: int,
    kv_tokens: int,
    horizon: float = math.inf,
) -> ReplicaResult:
    """Run `reqs` to completion (or to `horizon` seconds) on one replica; see the module docstring."""
    sim = _Replica(reqs, cost, max_num_seqs, budget, kv_tokens)
    return sim.run(horizon)


class _Replica:
    def __init__(
        self, reqs: list[SimRequest], cost: IterationCost, max_num_seqs: int, budget: int, kv_tokens: int
    ) -> None:
        self.cost = cost
        self.max_seqs = max_num_seqs
        self.budget = budget
        self.kv_cap = kv_tokens
        self.succ = {r.after: r for r in reqs if r.after is not None}
        self.pending = [(r.ready, i, r) for i, r in enumerate(reqs) if r.after is None]
        heapq.heapify(self.pending)
        self.order = len(reqs)
        self.waiting: deque[SimRequest] = deque()
        self.prefilling: list[_Seq] = []
        self.decoding: list[tuple[int, int, _Seq]] = []  # heap of (g at which it finishes, order, seq)
        self.g = 0  # decode iterations so far (every iteration decodes every decoding sequence)
        self.ctx = 0  # total context of the decoding sequences
        self.kv_used = 0
        self.t = 0.0
        self.out = ReplicaResult(0.0, curve=[(0.0, 0.0)])
        self.tokens = 0.0

    def run(self, horizon: float) -> ReplicaResult:
        while True:
            while self.pending and self.pending[0][0] <= self.t:
                self.waiting.append(heapq.heappop(self.pending)[2])
            self._admit()
            if not self.prefilling and not self.decoding:
                if not self.pending:
                    break
                self.t = max(self.t, self.pending[0][0])
                continue
            if self.t >= horizon:
                self._record_progress()
                break
            if self.prefilling:
                self._mixed_iteration()
            elif not self._decode_run(horizon):
                self._record_progress()
                break
        self.out.end = self.t
        return self.out

    def _admit(self) -> None:
        while self.waiting and len(self.prefilling) + len(self.decoding) < self.max_seqs:
            r = self.waiting[0]
            need = r.prompt + r.target
            if self.kv_used + need > self.kv_cap and (self.prefilling or self.decoding):
                return
            self.waiting.popleft()
            self.kv_used += need
            hit = min(r.cached, r.prompt - 1) if self.g > 0 else 0
            seq = _Seq(r, 0 if r.done else r.prompt - max(0, hit), max(0, hit))
            if r.done:
                self._start_decoding(seq, r.done)
            else:
                self.prefilling.append(seq)

    def _start_decoding(self, seq: _Seq, decoded: int) -> None:
        if decoded >= seq.req.target:
            self._finish(seq)
            return
        seq.entry_g, seq.entry_decoded = self.g, decoded
        self.ctx += seq.req.prompt + decoded
        heapq.heappush(self.decoding, (self.g + seq.req.target - decoded, self.order, seq))
        self.order += 1

    def _mixed_iteration(self) -> None:
        ndec = len(self.decoding)
        left = self.budget - ndec
        pre, pairs, done = 0, 0.0, []
        for seq in self.prefilling:
            if left <= 0:
                break
            n = min(seq.prefill_left, left)
            pairs += n * (seq.prefilled + n / 2)
            seq.prefill_left -= n
            seq.prefilled += n
            pre += n
            left -= n
            if seq.prefill_left == 0:
                done.append(seq)
        self.t += self.cost.seconds(pre, ndec, self.ctx, pairs)
        self.g += 1
        self.ctx += ndec
        self._pop_finished()
        for seq in done:
            self.prefilling.remove(seq)
            self._start_decoding(seq, 1)

    def _decode_run(self, horizon: float) -> bool:
        """Decode iterations up to the next completion, arrival or the horizon (never past it: the
        iteration in progress at the horizon does not count). False when none fits before it."""
        n = len(self.decoding)
        k = self.decoding[0][0] - self.g
        c = self.cost
        f = c.factor(n)  # the decode batch curve: the same n sequences decode through the whole run
        step, per_ctx = f * c.step_seconds(0, n), f * c.context_token
        first = step + per_ctx * self.ctx
        if self.pending and len(self.decoding) < self.max_seqs:
            k = min(k, max(1, math.ceil((self.pending[0][0] - self.t) / first)))
        if horizon < math.inf:
            k = min(k, self._fits(horizon - self.t, n, step, per_ctx))
            if k <= 0:
                return False
        self.t += self._run_seconds(k, n, step, per_ctx)
        self.g += k
        self.ctx += n * k
        self._pop_finished()
        return True

    def _run_seconds(self, k: int, n: int, step: float, per_ctx: float) -> float:
        return k * step + per_ctx * (k * self.ctx + n * k * (k - 1) / 2)

    def _fits(self, seconds: float, n: int, step: float, per_ctx: float) -> int:
        """The most decode iterations that end within `seconds`."""
        k = int(seconds // (step + per_ctx * self.ctx)) if seconds > 0 else 0
        while k > 0 and self._run_seconds(k, n, step, per_ctx) > seconds + 1e-12:
            k -= 1
        return k

    def _pop_finished(self) -> None:
        while self.decoding and self.decoding[0][0] <= self.g:
            seq = heapq.heappop(self.decoding)[2]
            self.ctx -= seq.req.prompt + seq.entry_decoded + (self.g - seq.entry_g)
            self._finish(seq)

    def _finish(self, seq: _Seq) -> None:
        r = seq.req
        self.kv_used -= r.prompt + r.target
        self.out.finish[r.key] = self.t
        self.tokens += r.prompt + r.target - r.done
        self.out.curve.append((self.t, self.tokens))
        nxt = self.succ.get(r.key)
        if nxt is not None:
            heapq.heappush(self.pending, (max(self.t, nxt.ready), self.order, nxt))
            self.order += 1

    def _record_progress(self) -> None:
        for _, _, seq in self.decoding:
            self.out.progress[seq.req.key] = seq.entry_decoded + (self.g - seq.entry_g)


def work_until(curve: list[tuple[float, float]], t: float) -> float:
    """Tokens processed by time t, interpolating between completions."""
    if t <= 0 or len(curve) < 2:
        return 0.0
    prev = curve[0]
    for point in curve[1:]:
        if point[0] >= t:
            span = point[0] - prev[0]
            return prev[1] + (point[1] - prev[1]) * ((t - prev[0]) / span if span > 0 else 1.0)
        prev = point
    return prev[1]
