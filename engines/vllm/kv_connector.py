"""teola's vLLM KV connector: a preempted call's KV blocks go to host memory and come back on resume.

vLLM loads it by name (`engines/vllm/kv_swap.py` builds the `kv_transfer_config`):

    kv_transfer_config={"kv_connector": "TeolaSwapConnector", "kv_role": "kv_both",
                        "kv_connector_module_path": "engines.vllm.kv_connector",
                        "kv_connector_extra_config": {"host_bytes": 2 << 30}}

A call takes part when its request carries `kv_transfer_params={"teola_swap": {"key": ..., "costs":
{...}}}` (`engines/kv_swap_choice.SwapCosts`); the key stays the same across the call's resumes.
`"on_finish": true` also saves a call that finishes normally: a call that stops for a tool call
(`pause_kv="swap"`), whose continuation comes back under the same key.

A call cancelled by its client never resumes, so its KV is not saved: before aborting it, the
adapter sends a pre-aborted marker request (`kv_swap.forget_params`) and waits until it has reached
`request_finished` (vLLM handles aborts ahead of requests queued before them), which marks the key
cancelled (also dropping anything saved for it); the abort's save then finds the mark.

Scheduler side (in vLLM's engine-core process): when such a call is aborted (teola's preemption),
or finishes with on_finish set, `request_finished` asks `SwapIndex.save` whether a round trip through host
memory beats prefilling its computed tokens again; if so vLLM keeps the blocks until the worker reports them
saved. When the call comes back (prompt + the tokens decoded so far), `get_num_new_matched_tokens` offers the
saved blocks past what the prefix cache still holds, if loading them beats prefilling them.

Worker side (wherever vLLM runs the model: the same process on CPU, a worker process on GPUs): each
step it executes the scheduler's jobs with `KVSwapManager` — drops, then one batched gather for every
block of every call saved this step (all layers), then the batched scatter of every load — before
the forward pass reads the cache. Only the jobs cross the process boundary (pickled with the step's
metadata), so the scheduler's index is the one source of truth and nothing else is shared.

Counters: `TeolaSwapWorker.teola_kv_swap_stats` (a vLLM worker extension, called through
`collective_rpc`) returns the scheduler's counters as of the last step and the worker's byte counts.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)
from vllm.v1.request import RequestStatus

from engines.kvswap.choice import SwapCosts
from engines.kvswap.index import SwapIndex, SwapJobs
from engines.kvswap.swap import KVSwapManager, SwapTotals
from engines.vllm.kv_swap import forgotten

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

log = logging.getLogger(__name__)
PARAM = "teola_swap"
DEFAULT_HOST_BYTES = 2 << 30


@dataclass
class TeolaSwapMetadata(KVConnectorMetadata):
    jobs: SwapJobs = field(default_factory=SwapJobs)


def _swap_param(request: Request) -> tuple[str, SwapCosts] | None:
    params = (request.kv_transfer_params or {}).get(PARAM)
    if not isinstance(params, dict) or not isinstance(params.get("key"), str):
        return None
    return params["key"], SwapCosts.from_dict(params.get("costs"))


def _saves_on_finish(request: Request) -> bool:
    """Whether the call's KV is offered for saving now that it ended: aborted (teola preempted it),
    or ended normally with "on_finish" (it paused for a tool and its continuation will come back)."""
    if request.status == RequestStatus.FINISHED_ABORTED:
        return True
    params = (request.kv_transfer_params or {}).get(PARAM) or {}
    return bool(params.get("on_finish")) and request.status in (
        RequestStatus.FINISHED_STOPPED,
        RequestStatus.FINISHED_LENGTH_CAPPED,
    )


def _record_bytes(kv_cache_config: KVCacheConfig) -> int:
    """Bytes of one block over all layers (the worker's KVSwapManager.record_bytes)."""
    return sum(g.kv_cache_spec.page_size_bytes * len(g.layer_names) for g in kv_cache_config.kv_cache_groups)


class TeolaSwapConnector(KVConnectorBase_V1):
    """See the module docstring. Option (`kv_connector_extra_config`): host_bytes, the bound on
    host memory held by saved calls (least recently saved dropped first; a dropped call recomputes)."""

    def __init__(self, vllm_config: VllmConfig, role: KVConnectorRole, kv_cache_config: KVCacheConfig):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        if len(kv_cache_config.kv_cache_groups) != 1:
            raise ValueError(
                "TeolaSwapConnector supports models with one KV-cache group "
                f"(plain attention), got {len(kv_cache_config.kv_cache_groups)}"
            )
        self.block_size = vllm_config.cache_config.block_size
        host_bytes = int(self._kv_transfer_config.get_from_extra_config("host_bytes", DEFAULT_HOST_BYTES))
        self.index = SwapIndex(self.block_size, _record_bytes(kv_cache_config), host_bytes)
        self._local: dict[str, int] = {}  # request id -> cached tokens offered at its last match
        self._loaded: dict[str, int] = {}  # request id -> tokens it loaded (reported when it finishes)
        self.manager: KVSwapManager | None = None
        self.released: set[str] = set()
        self.scheduler_counters: dict[str, int] = {}

    @property
    def requires_kv_delivery(self) -> bool:
        return False  # a best-effort cache: a save that does not happen is a recompute later

    # ---- scheduler side ---------------------------------------------------------------------------
    def get_num_new_matched_tokens(self, request: Request, num_computed_tokens: int) -> tuple[int, bool]:
        swap = _swap_param(request)
        if swap is None:
            return 0, False
        self._local[request.request_id] = num_computed_tokens
        return self.index.matched(swap[0], request.all_token_ids, num_computed_tokens, swap[1]), False

    def update_state_after_alloc(self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int):
        swap = _swap_param(request)
        if swap is None:
            return
        local = self._local.pop(request.request_id, 0)
        self.index.consume(swap[0], blocks.get_block_ids()[0], local, num_external_tokens)
        if num_external_tokens > 0:
            self._loaded[request.request_id] = num_external_tokens

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:
        return TeolaSwapMetadata(self.index.take_jobs())

    def request_finished(self, request: Request, block_ids: list[int]) -> tuple[bool, dict[str, Any] | None]:
        self._local.pop(request.request_id, None)
        loaded = self._loaded.pop(request.request_id, 0)
        marker = forgotten(request.kv_transfer_params)
        if marker is not None:  # cancelled calls (kv_swap.forget): nothing of theirs is kept
            self.index.forget(*marker)
            return False, None
        swap = _swap_param(request)
        # what this run loaded is reported whether or not it is saved again (a resumed call preempted anew)
        report = {PARAM: {"loaded_tokens": loaded}} if swap is not None else None
        if swap is None or not _saves_on_finish(request):
            if swap is not None:
                self.index.cancelled(swap[0])  # a cancelled call that ended on its own: clear the mark
            return False, report
        # tokens whose KV is written: with async scheduling the last step may still be in flight
        computed = request.num_computed_tokens - int(getattr(request, "num_in_flight_tokens", 0) or 0)
        delay = self.index.save(
            swap[0], request.request_id, request.all_token_ids, block_ids, computed, swap[1]
        )
        return delay, report

    # ---- worker side ------------------------------------------------------------------------------
    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]):
        caches = list(dict.fromkeys(kv_caches.values()))  # a tensor shared by layers counts once
        num_blocks = self._kv_cache_config.num_blocks
        dims = {0 if c.shape[0] == num_blocks else 1 for c in caches}
        if len(dims) != 1 or any(c.shape[min(dims)] != num_blocks for c in caches):
            raise ValueError(
                f"TeolaSwapConnector: no block dimension of size {num_blocks} in the KV caches "
                f"{[tuple(c.shape) for c in caches][:2]}"
            )
        self.manager = KVSwapManager(caches, block_dim=dims.pop())
        if self.manager.record_bytes != self.index.record_bytes:
            log.warning(
                "TeolaSwapConnector: worker block record %d bytes, scheduler assumes %d",
                self.manager.record_bytes,
                self.index.record_bytes,
            )

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        meta = self._get_connector_metadata()
        assert isinstance(meta, TeolaSwapMetadata)
        jobs = meta.jobs
        self.scheduler_counters = jobs.counters
        if jobs.empty():
            return
        if self.manager is None:
            raise RuntimeError("TeolaSwapConnector: jobs arrived before the KV caches were registered")
        self.manager.drop(jobs.drops)
        if jobs.saves:  # one batched gather for every block of every call saved this step
            self.manager.swap_out({key: ids for key, ids in jobs.saves})
        self.released.update(jobs.releases)
        if jobs.loads:  # one batched scatter (one copy per run of adjacent host records)
            self.manager.swap_in(
                {key: ids for key, ids, _ in jobs.loads}, skip={key: first for key, _, first in jobs.loads}
            )

    def wait_for_layer_load(self, layer_name: str) -> None:
        return  # loads are synchronous and whole, done in start_load_kv

    def save_kv_layer(
        self, layer_name: str, kv_layer: torch.Tensor, attn_metadata: Any, **kwargs: Any
    ) -> None:
        return  # saves happen when a call ends (request_finished), not during the forward pass

    def wait_for_save(self):
        return

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        done, self.released = self.released, set()
        return (done or None), None

    def stats(self) -> dict[str, Any]:
        """Scheduler counters (as of the last step) and the worker's swap totals."""
        totals = self.manager.totals.as_dict() if self.manager is not None else {}
        return {
            **self.scheduler_counters,
            **totals,
            "record_bytes": self.manager.record_bytes if self.manager is not None else 0,
            "backend": self.manager.backend if self.manager is not None else None,
        }

    def measure(self, blocks: int = 64, repeats: int = 3) -> dict[str, float]:
        """The batched kernel's bandwidth and fixed cost on this engine's own caches: gather 1 and
        `blocks` blocks to host memory and scatter them back to where they were (contents unchanged)."""
        if self.manager is None:
            raise RuntimeError("TeolaSwapConnector: the KV caches are not registered yet")
        n = max(2, min(blocks, self.manager.num_blocks))
        timings = {}
        for count in (1, n):
            best = float("inf")
            for r in range(repeats):
                key = ("teola-measure", count, r)
                t0 = time.perf_counter()
                self.manager.swap_out({key: list(range(count))})
                self.manager.swap_in({key: list(range(count))})
                best = min(best, (time.perf_counter() - t0) / 2)
            timings[count] = best
        self.manager.totals = SwapTotals()  # the counters show the calls' swaps only
        per_block = max((timings[n] - timings[1]) / (n - 1), 1e-12)
        return {
            "swap_bytes_per_s": self.manager.record_bytes / per_block,
            "swap_fixed_s": max(timings[1] - per_block, 0.0),
            "record_bytes": self.manager.record_bytes,
        }


class TeolaSwapWorker:
    """vLLM worker extension (`worker_extension_cls`): reach the connector through collective_rpc."""

    def teola_kv_swap_stats(self) -> dict[str, Any]:
        return _connector().stats()

    def teola_kv_swap_measure(self) -> dict[str, float]:
        return _connector().measure()


def _connector() -> TeolaSwapConnector:
    from vllm.distributed.kv_transfer import get_kv_transfer_group, has_kv_transfer_group

    connector = get_kv_transfer_group() if has_kv_transfer_group() else None
    if not isinstance(connector, TeolaSwapConnector):
        raise RuntimeError(f"this vLLM worker runs no TeolaSwapConnector (it has {type(connector).__name__})")
    return connector
