"""A simulated LLM's sequences, each iteration's plan, and how sequences get KV blocks: admission
(prefix-cache hits, a swapped or aborted request's KV swapped back in, a paused call's held KV),
preemption, and what happens to a call's KV while it pauses for a tool (LAMPS / INFERCEPT handlings):

- "preserve": the finished call's blocks stay allocated (not evictable) until the call that
  continues it (same "kv_key") is admitted and takes them over: nothing is recomputed;
- "swap": its blocks move to host memory (the next iteration pays the swap-out) and back in when the
  continuing call is admitted (it pays the swap-in);
- "discard": its blocks are freed like any finished call's; the prefix cache may still hold them, so
  the continuing call recomputes only what was evicted (what vLLM itself does).

With `decide_pause` set, a pausing call's handling is chosen when it reaches its API call, from
its context then and the running batch's, instead of taken from its request (INFERCEPT's own,
dynamic choice; bench.sim_lamps runs its baselines so).

When nothing runs and the next waiting call cannot get blocks because preserved KV fills the
memory, the most recently paused preserved call loses its KV (it continues as if discarded):
`reclaim_preserved`, so preserve cannot deadlock the engine.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from engines.kvswap.choice import SurvivalTracker
from engines.llm_text.split_parser import SplitParser
from engines.protocol import StreamEvent
from engines.requests import DECODE_OPS
from engines.sim.kv import Holding, block_hashes
from engines.stream_events import KVReport

Emit = Callable[[int, str, Any], Awaitable[None]]


@dataclass(eq=False, slots=True)
class SimSeq:
    """One request inside a SimLLM."""

    op: str
    index: int
    req: dict[str, Any]
    ids: list[int]
    prompt_len: int
    target: int
    order: int
    future: asyncio.Future
    emit: Emit | None
    parser: SplitParser | None
    held: Holding = field(default_factory=Holding)
    computed: int = 0
    cached: int = -1  # prefix-cache hit of the first admission (tokens)
    out: list[int] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    swapped: int = 0  # blocks held in swap space while preempted by swap
    state: str = "waiting"  # waiting | running | done
    topic: str = "w"
    arrived: float = 0.0  # loop time the engine got the request
    scheduled: float = -1.0  # loop time it first ran (-1: not yet)
    written: list[int] | None = (
        None  # the ids of the tokens it writes, cycled (None: engines.sim.text.output_id)
    )
    executor_s: float = 0.0  # seconds of the iterations it ran in (engines/sim/llm.py)

    @property
    def keys(self) -> set[str]:
        return {k for k in (self.req.get("owner"), self.req.get("tag")) if k}


@dataclass(slots=True)
class PausedKV:
    """A paused call's KV: "preserve" (blocks still allocated in `held`) or "swap" (on the host)."""

    handling: str
    computed: int
    held: Holding | None = None
    owner: str | None = None


class SimAdmission:
    """Each iteration's plan, admission, preemption and pause handling of SimLLM (a mixin: it uses
    the engine's pool, queues, stats and swap cost)."""

    paused: dict[str, PausedKV]
    survival: SurvivalTracker
    # (the pausing call, the context tokens of the calls still running) -> its handling; None: the request's
    decide_pause: Callable[[SimSeq, int], str] | None = None

    def rerank(self, keys: list[str], priority: int) -> int:
        """Give the waiting and running requests of these owners / tags the engine priority
        `priority` (lower first), so a demotion or promotion the policy made after they were sent
        reaches the engine's own order (`scheduling="priority"`). Returns how many changed."""
        wanted = set(keys)
        hit = [s for s in self.waiting + self.running if s.keys & wanted]
        for seq in hit:
            seq.req["priority"] = priority
        return len(hit)

    async def report_kv(self, seq: SimSeq) -> None:
        """Send a decoding sequence's StreamEvent.KV (engines.stream_events.KVReport: its prompt tokens
        with the ids it resumes from, the block size, the pool's blocks in use and in all) at its first
        token and whenever its next token starts a new block."""
        bs = self.pool.block_size
        if seq.emit is None or not (len(seq.out) == 1 or len(seq.ids) % bs == 1):
            return
        used = self.pool.num_blocks - self.pool.free
        await seq.emit(
            seq.index,
            StreamEvent.KV,
            KVReport(
                prompt_tokens=len(seq.ids) - len(seq.out),
                block_size=bs,
                used_blocks=used,
                total_blocks=self.pool.num_blocks,
            ),
        )

    def _schedule(self) -> tuple[list[tuple[SimSeq, int]], float]:
        """This iteration's work: (sequence, tokens to compute) pairs, and swap seconds."""
        plan: list[tuple[SimSeq, int]] = []
        budget, extra = self.budget, 0.0
        if self.scheduling == "priority":
            self.running.sort(key=lambda s: (s.req["priority"], s.order))
        for seq in list(self.running):
            if seq.state != "running" or budget <= 0:
                continue
            n = min(len(seq.ids) - seq.computed, budget)
            while not self.pool.allocate(seq.held, self._blocks_for(seq, n)):
                victim = self.running[-1]
                extra += self._preempt(victim)
                plan = [(s, k) for s, k in plan if s is not victim]
                if victim is seq:
                    break
            if seq.state == "running":
                plan.append((seq, n))
                budget -= n
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = min(self.waiting, key=self._rank) if self.scheduling == "priority" else self._head()
            admitted, seconds = self._admit(seq, budget)
            if not admitted:
                worst = self.running[-1] if self.running else None
                if (
                    self.scheduling == "priority"
                    and worst is not None
                    and worst.req["priority"] > seq.req["priority"]
                ):
                    extra += self._preempt(worst)
                    plan = [(s, k) for s, k in plan if s is not worst]
                    continue
                if not self.running and self.reclaim_preserved(seq):  # else nothing could ever run again
                    continue
                break
            extra += seconds
            n = min(len(seq.ids) - seq.computed, budget)
            plan.append((seq, n))
            budget -= n
        return plan, extra

    def _rank(self, seq: SimSeq) -> tuple[int, int]:
        return (seq.req["priority"], seq.order)

    def _head(self) -> SimSeq:
        """The next waiting sequence in FCFS order, except that a call resuming on KV its paused call
        preserved goes first (INFERCEPT keeps a preserved request in the running batch: it resumes as
        its API returns and is never queued behind new requests that cannot get memory)."""
        for seq in self.waiting:
            entry = self.paused.get(seq.req.get("kv_key"))
            if entry is not None and entry.held is not None and not seq.swapped:
                return seq
        return self.waiting[0]

    def _blocks_for(self, seq: SimSeq, n: int) -> int:
        return math.ceil((seq.computed + n) / self.pool.block_size) - seq.held.blocks

    def _admit(self, seq: SimSeq, budget: int) -> tuple[bool, float]:
        """Move a waiting sequence into the running set with the blocks its first chunk needs."""
        bs = self.pool.block_size
        if seq.req["kv_key"] in self.paused and not seq.swapped:
            return self._claim_paused(seq, budget)
        if seq.swapped:
            need = math.ceil((seq.computed + min(len(seq.ids) - seq.computed, budget)) / bs)
            if not self.pool.allocate(seq.held, need):
                return False, 0.0
            seconds, seq.swapped = seq.swapped * self.swap_seconds_per_block, 0
        elif (
            key := hash(tuple(seq.ids))
        ) in self.host_kv:  # a preempted request resumes: swap its KV back in
            # as vLLM's KV connector is asked: only the tokens past the local prefix-cache hit load
            # from host memory (teola_kv_connector.get_num_new_matched_tokens)
            computed = self.host_kv[key]
            hashes = block_hashes(seq.ids, bs, stop=computed // bs)
            hit = self.pool.cached_blocks(hashes)
            need = math.ceil((computed + min(len(seq.ids) - computed, budget)) / bs) - hit
            self.pool.acquire(seq.held, hashes[:hit])
            if not self.pool.allocate(seq.held, need):
                self.pool.release(seq.held)
                return False, 0.0
            del self.host_kv[key]
            self._note_resume(*self.survival.count(computed // bs, hit))
            loaded = computed - hit * bs
            seq.computed, seconds = computed, math.ceil(loaded / bs) * self.swap_seconds_per_block
            if seq.cached < 0:  # reported as cached: none of it is computed again
                seq.cached = computed
                self.stats["prompt_tokens"] += seq.prompt_len
            self.stats["swapped_in_tokens"] += loaded
        else:
            hashes = block_hashes(
                seq.ids, bs, stop=(len(seq.ids) - 1) // bs
            )  # the last token is always computed
            hit = self.pool.cached_blocks(hashes)
            need = math.ceil(min(len(seq.ids), hit * bs + budget) / bs) - hit
            self.pool.acquire(seq.held, hashes[:hit])  # first: acquired blocks are no longer evictable
            if not self.pool.allocate(seq.held, need):
                self.pool.release(seq.held)
                return False, 0.0
            seq.computed, seconds = hit * bs, 0.0
            if self.survival.watching:  # an aborted call, not swapped, may be resuming
                self._note_resume(*self.survival.resumed(hash(tuple(seq.ids)), hit))
            if seq.cached < 0:
                seq.cached = hit * bs
                self.stats["prompt_tokens"] += seq.prompt_len
                self.stats["cached_tokens"] += seq.cached
            else:
                self.stats["recomputed_tokens"] += len(seq.ids) - hit * bs
        self._run(seq)
        return True, seconds

    def _note_resume(self, blocks: int, cached: int) -> None:
        """An aborted call resumed: `cached` of the `blocks` full blocks it had computed were still in
        the prefix cache (counted by `survival`, whose share abort_kv="auto" weighs)."""
        self.stats["resumed_blocks"] += blocks
        self.stats["resumed_cached_blocks"] += cached

    def _run(self, seq: SimSeq) -> None:
        """A waiting sequence joins the running batch (the first time: note when)."""
        self.waiting.remove(seq)
        self.running.append(seq)
        seq.state = "running"
        if seq.scheduled < 0:
            seq.scheduled = asyncio.get_running_loop().time()

    def _preempt(self, seq: SimSeq) -> float:
        """Put a running sequence back at the head of the waiting queue (recompute or swap)."""
        self.stats["preemptions"] += 1
        self.running.remove(seq)
        seconds = 0.0
        if self.preemption == "swap":
            seq.swapped = seq.held.blocks
            self.stats["swapped_blocks"] += seq.swapped
            seconds = seq.swapped * self.swap_seconds_per_block
        else:
            seq.computed = 0
        self.pool.release(seq.held)
        seq.state = "waiting"
        self.waiting.insert(0, seq)
        return seconds

    def _release(self, seq: SimSeq, aborted: bool) -> None:
        """A finished call gives its blocks back, unless it pauses with "preserve" or "swap"."""
        handling, key = seq.req.get("pause_kv"), seq.req.get("kv_key")
        if handling is not None and not aborted and self.decide_pause is not None:
            handling = self.decide_pause(seq, sum(s.computed for s in self.running))
        if handling is not None:
            self.stats[f"paused_{handling}"] = self.stats.get(f"paused_{handling}", 0) + 1
        if aborted or seq.op not in DECODE_OPS or handling not in ("preserve", "swap"):
            self.pool.release(seq.held)
            return
        if handling == "preserve":
            self.paused[key] = PausedKV("preserve", seq.computed, seq.held, seq.req.get("owner"))
            return
        blocks = math.ceil(seq.computed / self.pool.block_size)
        self._swap_debt += blocks * self.swap_seconds_per_block
        self.stats["swapped_blocks"] += blocks
        self.pool.release(seq.held)
        self.paused[key] = PausedKV("swap", seq.computed, owner=seq.req.get("owner"))

    def _claim_paused(self, seq: SimSeq, budget: int) -> tuple[bool, float]:
        """Admit the call that continues a paused one with the KV it left ("preserve" / "swap")."""
        entry = self.paused[seq.req["kv_key"]]
        bs = self.pool.block_size
        computed = min(entry.computed, len(seq.ids) - 1)
        total = math.ceil((computed + min(len(seq.ids) - computed, budget)) / bs)
        held = entry.held if entry.held is not None else Holding()
        if not self.pool.allocate(held, total - held.blocks):
            return False, 0.0
        del self.paused[seq.req["kv_key"]]
        seconds = (
            0.0 if entry.handling == "preserve" else math.ceil(computed / bs) * self.swap_seconds_per_block
        )
        seq.held, seq.computed, seq.cached = held, computed, computed
        self.stats["prompt_tokens"] += seq.prompt_len
        self.stats["resumed_paused_tokens"] = self.stats.get("resumed_paused_tokens", 0) + computed
        self._run(seq)
        return True, seconds

    def reclaim_preserved(self, seq: SimSeq) -> bool:
        """Nothing runs and `seq` cannot get blocks: free the KV of the most recently paused
        "preserve" call (another call's if there is one), which then continues as if discarded
        (recomputing what the prefix cache lost), like vLLM preempting its newest request. Without
        it, preserved KV could fill the memory while the calls that would continue it wait: a
        deadlock. False when no call holds preserved KV."""
        keys = [k for k, e in self.paused.items() if e.held is not None]
        if not keys:
            return False
        others = [k for k in keys if k != seq.req.get("kv_key")]
        entry = self.paused.pop((others or keys)[-1])
        self.pool.release(entry.held)
        self.stats["reclaimed_preserved"] = self.stats.get("reclaimed_preserved", 0) + 1
        return True

    def drop_paused(self, keys: set[str]) -> int:
        """Forget paused calls' KV by kv_key or owner (their continuation will not come): preserved
        blocks are freed."""
        hit = [k for k, e in self.paused.items() if k in keys or e.owner in keys]
        for k in hit:
            entry = self.paused.pop(k)
            if entry.held is not None:
                self.pool.release(entry.held)
        return len(hit)
