"""`SimLLM`: an LLM engine as a cost model, scheduled per iteration the way vLLM v1 schedules.

Each iteration runs the running sequences (one token each when decoding, a chunk of the prompt when
prefilling) and admits waiting ones while `max_num_seqs`, the `max_num_batched_tokens` budget and
free KV blocks allow (chunked prefill; prefix-cache hits skip the cached blocks;
`enable_prefix_caching=False` turns the prefix cache off, as in vLLM). It lasts

    base + prefill_token * prefill tokens + decode_seq * decoding sequences + context_token * their context
         + prefill_attention * (prefilled tokens x the context each attends to) / 1000

seconds on the event loop's clock (`IterationCost`, SamuLLM's linear form plus prefill attention, which
is what makes long prompts superlinear on a CPU; an iteration that only decodes is scaled by the
profile's decode batch curve, if any; `teola profile` fits it to a real engine). When a sequence needs a block
and none is free, the last admitted running sequence is preempted, by recompute (its blocks are freed; it is
re-prefilled, mostly from the prefix cache) or by swap (its blocks move out and back in at
`swap_seconds_per_block`, the batched swap kernel's measured cost). `abort_kv="swap"` models teola's own
preemption (abort, then resume with the decoded token ids) through a KV swap: an aborted running request's KV
moves to host memory, and a later request with exactly its tokens (prompt + resume_ids) swaps it back in
instead of prefilling ("drop", vLLM's behaviour: the blocks are freed; the prefix cache may still hold them).
`abort_kv="auto"` swaps an aborted call only when engines.kvswap.choice.save_pays says so (out now and in
later against recomputing what the prefix cache will have lost: the share of full blocks earlier resumed
calls found still cached is neither loaded nor recomputed; the partly filled last block always is). With
`scheduling="priority"` waiting sequences are taken by request priority and a waiting one may preempt a worse
running one, like vLLM's priority policy.

It speaks engines/protocol.py for the LLM ops (execute, stream with items / deltas / progress,
abort by owner or tag, resume_ids) with outputs from engines/sim/text.py. Each result also reports
"queued_s": seconds from the engine getting the request to its first iteration (vLLM's
first_scheduled_time - arrival_time), and "executor_s": the seconds of the iterations it ran in (its
executor time, the service Autellix charges; time waiting or preempted is not counted). A request may carry
"prompt_token_ids" (real token ids, e.g. from the model's tokenizer: teola/emulate) instead of the pseudo ids
derived from its parts, and "output_token_ids" (token k written is its k-th id, cycled) instead of pseudo
output ids. On a real event loop, `clock = WallClock()` keeps iterations on time (engines/sim/wall_clock.py).
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import AsyncIterator
from typing import Any

from engines.kvswap.choice import SurvivalTracker, save_pays
from engines.llm_text.llm_requests import check_request
from engines.llm_text.prefix_memo import PrefixMemo
from engines.llm_text.split_parser import SplitParser
from engines.protocol import EngineProfile, StreamEvent
from engines.requests import DECODE_OPS, PREFILL_OPS, PrimOp
from engines.sim.admission import Emit, SimSeq
from engines.sim.cost import IterationCost
from engines.sim.decoding import SimDecoding
from engines.sim.device import DeviceShare, computing
from engines.sim.kv import BlockPool
from engines.sim.text import (
    ASSISTANT_TURN,
    LengthSampler,
    continuation_ids,
    prompt_ids,
    request_token_ids,
    resize_prompt,
)
from engines.sim.wall_clock import WallClock


def check_modes(name: str, *, scheduling: str, abort_kv: str, preemption: str) -> None:
    """Raise ValueError naming sim engine `name` and the first mode it does not model."""
    if scheduling not in ("fcfs", "priority"):
        raise ValueError(f"sim engine {name!r}: scheduling must be 'fcfs' or 'priority', got {scheduling!r}")
    if abort_kv not in ("drop", "swap", "auto"):
        raise ValueError(f"sim engine {name!r}: abort_kv must be 'drop', 'swap' or 'auto', got {abort_kv!r}")
    if preemption not in ("recompute", "swap"):
        raise ValueError(f"sim engine {name!r}: preemption must be 'recompute' or 'swap', got {preemption!r}")


class SimLLM(SimDecoding):
    """See the module docstring. `cost`: an IterationCost or its fields as a dict; `lengths`: recorded
    output lengths per kind (engines.sim.text.LengthSampler); the rest mirror vLLM's settings."""

    ops = PREFILL_OPS | DECODE_OPS
    default_profile = EngineProfile(max_batch=256, max_efficient_batch=32)

    def __init__(
        self,
        name: str,
        cost: IterationCost | dict[str, float] | None = None,
        *,
        max_num_seqs: int = 256,
        max_num_batched_tokens: int = 8192,
        num_blocks: int = 8192,
        block_size: int = 16,
        token_ratio: float = 1.15,
        template_tokens: int = 12,
        max_model_len: int = 8192,
        max_tokens: int = 256,
        lengths: dict[str, list[int]] | None = None,
        seed: int = 0,
        scheduling: str = "fcfs",
        preemption: str = "recompute",
        swap_seconds_per_block: float = 0.0,
        max_batch: int | None = None,
        max_efficient_batch: int | None = None,
        n_items: int = 3,
        abort_kv: str = "drop",
        device: DeviceShare | None = None,
        skip_known_prefixes: bool = True,
        enable_prefix_caching: bool = True,
        **_ignored: Any,
    ) -> None:
        check_modes(name, scheduling=scheduling, abort_kv=abort_kv, preemption=preemption)
        self.name = name
        self.cost = cost if isinstance(cost, IterationCost) else IterationCost(**(cost or {}))
        self.max_num_seqs = max_num_seqs
        self.budget = max_num_batched_tokens
        self.pool = BlockPool(num_blocks, block_size, prefix_caching=enable_prefix_caching)
        # partial prefills answered at once, as the vLLM adapter answers them
        # (engines/llm_text/prefix_memo.py)
        self.prefixes = PrefixMemo(block_size) if skip_known_prefixes else None
        self.token_ratio = token_ratio
        self.template_tokens = template_tokens
        self.max_model_len = max_model_len
        self.max_tokens = max_tokens
        self.n_items = n_items
        self.sampler = LengthSampler(lengths, seed)
        self.scheduling = scheduling
        self.preemption = preemption
        self.swap_seconds_per_block = swap_seconds_per_block
        self.abort_kv = abort_kv
        self.device = device  # its share of a machine other simulated engines use (engines/sim/device.py)
        # what teola admits against, as vLLM's adapter reports it: max_num_seqs and the KV cache's tokens
        self.profile = EngineProfile(
            max_batch or max_num_seqs,
            min(max_efficient_batch or max_num_seqs, max_batch or max_num_seqs),
            token_budget=num_blocks * block_size,
            context_window=max_model_len,
        )
        self._start_empty()

    def _start_empty(self) -> None:
        """No sequences, no KV held for aborted or paused calls, no iterations counted yet."""
        self.host_kv: dict[int, int] = {}  # hash of an aborted request's tokens -> its computed tokens
        self.survival = SurvivalTracker()  # aborted requests' resumes: what the prefix cache kept
        self.paused: dict = {}  # kv_key -> a paused call's KV (engines/sim/admission.py)
        self._swap_debt = 0.0  # swap-out seconds the next iteration pays
        self.waiting: list[SimSeq] = []
        self.running: list[SimSeq] = []
        self._order = itertools.count()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self.stats = {
            "iterations": 0,
            "busy_s": 0.0,
            "prompt_tokens": 0,
            "cached_tokens": 0,
            "preemptions": 0,
            "swapped_blocks": 0,
            "recomputed_tokens": 0,
            "aborted": 0,
            "swapped_in_tokens": 0,
            "resumed_blocks": 0,
            "resumed_cached_blocks": 0,
            "swaps_declined": 0,
        }
        # (seconds, prefill tokens, decoding sequences, context tokens) of each iteration, when recorded
        self.iterations: list[tuple[float, int, int, int]] = []
        self.record_iterations = False
        self.clock: WallClock | None = None  # None: iterations take loop time as they come (the virtual loop)

    # ---- EngineBackend ------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = asyncio.create_task(self._loop(), name=f"sim-llm-{self.name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for seq in self.waiting + self.running:
            if not seq.future.done():
                seq.future.set_exception(RuntimeError(f"engine {self.name!r} stopped"))
        self.waiting.clear()
        self.running.clear()

    async def health(self) -> bool:
        return self._task is not None and not self._task.done()

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        return list(await asyncio.gather(*self._submit(op, requests, None)))

    async def stream(
        self, op: str, requests: list[dict[str, Any]]
    ) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        queue: asyncio.Queue = asyncio.Queue()

        async def emit(i: int, kind: str, value: Any) -> None:
            queue.put_nowait((i, kind, value))

        batch = asyncio.ensure_future(asyncio.gather(*self._submit(op, requests, emit)))
        batch.add_done_callback(lambda _: queue.put_nowait(None))
        while (event := await queue.get()) is not None:
            yield event
        batch.result()

    async def abort(self, keys: list[str]) -> int:
        """Stop the waiting and running requests of these owners / tags; each returns what it
        decoded so far, marked "aborted". Returns how many requests stopped."""
        wanted = set(keys)
        hit = [s for s in self.waiting + self.running if s.keys & wanted]
        for seq in hit:
            self.stats["aborted"] += 1
            if seq.state == "running" and seq.computed > 0 and seq.op in DECODE_OPS:
                blocks = math.ceil(seq.computed / self.pool.block_size)
                if self.abort_kv == "swap" or (self.abort_kv == "auto" and self._save_pays(seq.computed)):
                    self.host_kv[hash(tuple(seq.ids))] = seq.computed
                    self._swap_debt += blocks * self.swap_seconds_per_block
                    self.stats["swapped_blocks"] += blocks
                else:
                    self.stats["swaps_declined"] += self.abort_kv == "auto"
                    self.survival.watch(hash(tuple(seq.ids)), seq.computed // self.pool.block_size)
            await self._finish(seq, aborted=True)
        return len(hit) + self.drop_paused(wanted)

    def _save_pays(self, computed: int) -> bool:
        """abort_kv="auto": the rule of the real connector's save (`save_pays`), with the share of
        full blocks that calls resumed on this engine so far found still in the prefix cache (0
        before any resume)."""
        return save_pays(
            computed,
            self.pool.block_size,
            self.swap_seconds_per_block,
            self.cost.prefill_token,
            self.survival.share(),
        )

    def reset_prefix_cache(self) -> int:
        """Empty the prefix cache (blocks no running request holds), like vLLM's call of that name."""
        if self.prefixes is not None:
            self.prefixes.clear()
        return self.pool.drop_cached()

    # ---- requests -----------------------------------------------------------------------------------
    def _submit(self, op: str, requests: list[dict[str, Any]], emit: Emit | None) -> list[asyncio.Future]:
        if op not in self.ops:
            raise ValueError(f"sim engine {self.name!r} runs {', '.join(sorted(self.ops))}, not {op!r}")
        if self._task is None:
            raise RuntimeError(f"engine {self.name!r} is not started; await engine.start() first")
        seqs = [
            self._seq(
                op, i, check_request(op, r, self.max_tokens), emit, request_token_ids(r, "prompt_token_ids")
            )
            for i, r in enumerate(requests)
        ]
        for seq, r in zip(seqs, requests):
            seq.written = request_token_ids(r, "output_token_ids")
        out: list[asyncio.Future] = []
        for seq in seqs:
            known = (
                self.prefixes.answer(seq.ids, seq.req["cache_salt"])
                if seq.op == PrimOp.PARTIAL_PREFILLING and self.prefixes is not None
                else None
            )
            if known is None:
                self.waiting.append(seq)
                out.append(seq.future)
            else:
                out.append(asyncio.ensure_future(self._answered(seq, known)))
        self._wake.set()
        return out

    @staticmethod
    async def _answered(seq: SimSeq, result: dict[str, Any]) -> dict[str, Any]:
        seq.state = "done"
        if seq.emit is not None:
            await seq.emit(seq.index, StreamEvent.FINAL, result)
        return result

    def _seq(
        self, op: str, i: int, req: dict[str, Any], emit: Emit | None, token_ids: list[int] | None
    ) -> SimSeq:
        decode = op in DECODE_OPS
        kind = "split" if req["split"] else "text"
        if token_ids is not None:
            ids = list(token_ids)
        else:
            ids = prompt_ids(req["parts"], req["complete"], self.token_ratio, self.template_tokens)
            if decode and not req["continuation"] and not req["resume_ids"]:
                ids = self._replayed_prompt(ids, kind, req)
        ids += continuation_ids(req["continuation"], self.token_ratio)
        prompt_len = len(ids)
        target = 0
        if decode:
            full = req["max_tokens"] + len(req["resume_ids"])
            total = full if req["ignore_eos"] else self.sampler.sample(kind, repr(req["parts"]), full)
            target = max(1, total - len(req["resume_ids"])) if total > len(req["resume_ids"]) else 1
            ids = ids + list(req["resume_ids"])
        if len(ids) + target > self.max_model_len:
            raise ValueError(
                f"engine {self.name!r}: prompt of {len(ids)} tokens + {target} output tokens exceeds "
                f"max_model_len {self.max_model_len}"
            )
        parser = SplitParser(req["split"]) if decode and req["split"] else None
        # one word of the prompt, letters only, so each output token's text is one counted token
        topic = "".join(ch for ch in (req["parts"][-1][1].split() or ["w"])[0] if ch.isalpha())[:12] or "w"
        loop = asyncio.get_running_loop()
        return SimSeq(
            op,
            i,
            req,
            ids,
            prompt_len,
            target,
            next(self._order),
            loop.create_future(),
            emit,
            parser,
            topic=topic,
            arrived=loop.time(),
        )

    def _replayed_prompt(self, ids: list[int], kind: str, req: dict[str, Any]) -> list[int]:
        """The prompt resized to the length a replayed trace gives this call, when the sampler replays one."""
        n = self.sampler.prompt_tokens(kind, repr(req["parts"]))
        return resize_prompt(ids, n, len(ASSISTANT_TURN) if req["complete"] else 0) if n else ids

    # ---- the iteration loop -------------------------------------------------------------------------
    async def _loop(self) -> None:
        try:
            while True:
                if not self.waiting and not self.running:
                    self._wake.clear()
                    if self.clock is not None:
                        self.clock.idle()
                    await self._wake.wait()
                    continue
                await self._iteration()
        except Exception as exc:  # a bug here must fail the requests, not leave them hanging
            for seq in self.waiting + self.running:
                if not seq.future.done():
                    seq.future.set_exception(RuntimeError(f"sim engine {self.name!r} failed: {exc!r}"))
            raise

    async def _iteration(self) -> None:
        start = self.clock.start() if self.clock is not None else None
        plan, extra = self._schedule()
        decoding = [s for s, n in plan if n == 1 and s.out]
        prefill = sum(n for s, n in plan if not (n == 1 and s.out))
        # attention work of the prefill chunks: each new token attends to the context before it
        pairs = sum(n * (s.computed + n / 2) for s, n in plan if not (n == 1 and s.out))
        context = sum(s.computed for s in decoding)
        seconds = self.cost.seconds(prefill, len(decoding), context, pairs) + extra + self._swap_debt
        self._swap_debt = 0.0
        async with computing(self.device) as slowdown:
            seconds *= slowdown
            self.stats["iterations"] += 1
            self.stats["busy_s"] += seconds
            if self.record_iterations:
                self.iterations.append((seconds, prefill, len(decoding), context))
            await (asyncio.sleep(seconds) if start is None else self.clock.sleep(seconds, start))
        for seq, n in plan:
            if seq.state == "running":
                seq.executor_s += seconds  # time in a running step: the service Autellix charges
                await self._advance(seq, n)
