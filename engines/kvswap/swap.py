"""Swap whole requests' KV-cache blocks to host memory and back, batched (Autellix §4.2.2, §5).

Instead of one copy per block (vLLM's swap_blocks), a swap-out gathers every block of every request
in the call, across all layers, into one contiguous host buffer with one native kernel (csrc/); on
CUDA that is one gather kernel plus one device-to-host copy. A swap-in is the reverse, into whatever
blocks the block manager hands out then. Without the extension the same buffers are filled by a
per-block copy loop (`backend="fallback"`).

    mgr = KVSwapManager(kv_caches, block_dim=0)         # one tensor per layer, vLLM layout
    mgr.swap_out({"req-1": [4, 9, 2], "req-2": [7]})    # blocks may now be reused
    mgr.swap_in({"req-1": [0, 1, 3]})                    # new block ids, same count
    mgr.totals.as_dict()                                 # bytes, blocks, seconds per direction

Not thread-safe: call it from the engine's scheduling thread.
"""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import torch

from engines.kvswap._native import kvswap_available, load_kvswap
from engines.kvswap._native.kv_fallback import gather_blocks, scatter_blocks
from engines.kvswap._native.kv_layout import check_block_ids, describe_layers

log = logging.getLogger(__name__)

Backend = Literal["auto", "native", "fallback"]


@dataclass(slots=True)
class SwapStats:
    """One swap_out / swap_in call. `copies` counts copy operations issued (native: 1 per group of
    contiguous host records; fallback: one per block and layer)."""

    direction: Literal["out", "in"]
    requests: int
    blocks: int
    bytes: int
    seconds: float
    copies: int


@dataclass(slots=True)
class SwapTotals:
    """Running totals over a manager's lifetime."""

    swaps_out: int = 0
    swaps_in: int = 0
    blocks_out: int = 0
    blocks_in: int = 0
    bytes_out: int = 0
    bytes_in: int = 0
    seconds_out: float = 0.0
    seconds_in: float = 0.0

    def add(self, s: SwapStats) -> None:
        if s.direction == "out":
            self.swaps_out += 1
            self.blocks_out += s.blocks
            self.bytes_out += s.bytes
            self.seconds_out += s.seconds
        else:
            self.swaps_in += 1
            self.blocks_in += s.blocks
            self.bytes_in += s.bytes
            self.seconds_in += s.seconds

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(slots=True)
class _Swapped:
    extent: torch.Tensor  # uint8 [rows, record_bytes] host buffer shared by one swap_out call
    start: int
    count: int


class KVSwapManager:
    """Moves requests' KV blocks between the engine's caches and host memory.

    caches: one KV-cache tensor per layer, all on one device, blocks on dim `block_dim`
        (0: vLLM 0.32's [num_blocks, num_kv_heads, block_size, 2 * head_size]; 1: the older
        [2, num_blocks, block_size, num_kv_heads, head_size]). Permuted-stride views are accepted as
        long as each block's data is one dense chunk.
    backend: "native" (the teola_kvswap extension; ImportError if not built), "fallback" (per-block
        copy loop) or "auto" (native when built).
    pin_memory: page-lock host buffers (default: when the caches are on CUDA).
    """

    def __init__(
        self,
        caches: Sequence[torch.Tensor],
        *,
        block_dim: int = 0,
        backend: Backend = "auto",
        pin_memory: bool | None = None,
    ) -> None:
        if backend not in ("auto", "native", "fallback"):
            raise ValueError(f"backend must be 'auto', 'native' or 'fallback', got {backend!r}")
        self.caches = list(caches)
        self.block_dim = block_dim
        self._layers, self._record_bytes = describe_layers(self.caches, block_dim)
        self._num_blocks = min(layer.num_blocks for layer in self._layers)
        if backend == "native":
            load_kvswap()
        elif backend == "auto":
            backend = "native" if kvswap_available() else "fallback"
            if backend == "fallback":
                log.warning("teola_kvswap extension not built; KV swaps use a per-block copy loop")
        self.backend: Literal["native", "fallback"] = backend
        self.pin_memory = self.device.type == "cuda" if pin_memory is None else pin_memory
        self.totals = SwapTotals()
        self._swapped: dict[Hashable, _Swapped] = {}

    @property
    def device(self) -> torch.device:
        return self.caches[0].device

    @property
    def num_blocks(self) -> int:
        """KV blocks per layer of the device cache (the smallest layer's)."""
        return self._num_blocks

    @property
    def record_bytes(self) -> int:
        """Bytes one block takes in host memory (all layers)."""
        return self._record_bytes

    @property
    def host_bytes(self) -> int:
        """Host memory held by swapped-out requests (a buffer is freed when all its requests left)."""
        extents = {id(s.extent): s.extent for s in self._swapped.values()}
        return sum(e.nbytes for e in extents.values())

    def __contains__(self, request_id: Hashable) -> bool:
        return request_id in self._swapped

    def swapped_blocks(self, request_id: Hashable) -> int:
        """Number of blocks held on the host for `request_id` (KeyError if not swapped out)."""
        return self._swapped[request_id].count

    def swap_out(self, block_tables: Mapping[Hashable, Sequence[int]]) -> SwapStats:
        """Copy each request's blocks (in block-table order) to one new host buffer.

        The cache blocks are left as they are; the caller may reuse them once this returns."""
        for rid in block_tables:
            if rid in self._swapped:
                raise ValueError(f"request {rid!r} is already swapped out; swap it in or drop() it")
        ids = self._ids(block_tables, unique=False, what="swap_out")
        n = ids.numel()
        extent = torch.empty((n, self._record_bytes), dtype=torch.uint8, pin_memory=self.pin_memory)
        t0 = time.perf_counter()
        if n:
            self._gather(ids, extent)
        self._sync()
        stats = SwapStats(
            "out",
            len(block_tables),
            n,
            n * self._record_bytes,
            time.perf_counter() - t0,
            self._copies(n, 1 if n else 0),
        )
        start = 0
        for rid, table in block_tables.items():
            self._swapped[rid] = _Swapped(extent, start, len(table))
            start += len(table)
        self.totals.add(stats)
        return stats

    def swap_in(
        self, block_tables: Mapping[Hashable, Sequence[int]], *, skip: Mapping[Hashable, int] | None = None
    ) -> SwapStats:
        """Copy swapped-out requests back into the given (new) block ids and forget their host copy.

        Each table must have as many blocks as were swapped out for that request, less its `skip`
        (leading host blocks not copied back, e.g. because the prefix cache still holds them); all
        destination ids in one call must be distinct."""
        skip = dict(skip or {})
        for rid, table in block_tables.items():
            if rid not in self._swapped:
                raise ValueError(f"request {rid!r} is not swapped out")
            first = skip.get(rid, 0)
            if not isinstance(first, int) or not 0 <= first <= self._swapped[rid].count:
                raise ValueError(
                    f"request {rid!r}: skip must be an int in [0, {self._swapped[rid].count}], got {first!r}"
                )
            if len(table) != self._swapped[rid].count - first:
                raise ValueError(
                    f"request {rid!r}: {len(table)} destination blocks given, "
                    f"{self._swapped[rid].count} were swapped out, {first} skipped"
                )
        self._ids(block_tables, unique=True, what="swap_in")
        runs = self._runs(block_tables, skip)
        t0 = time.perf_counter()
        for extent, start, stop, ids in runs:
            self._scatter(extent[start:stop], ids)
        self._sync()
        n = sum(len(t) for t in block_tables.values())
        stats = SwapStats(
            "in",
            len(block_tables),
            n,
            n * self._record_bytes,
            time.perf_counter() - t0,
            self._copies(n, len(runs)),
        )
        for rid in block_tables:
            del self._swapped[rid]
        self.totals.add(stats)
        return stats

    def drop(self, request_ids: Sequence[Hashable]) -> None:
        """Forget swapped-out requests (e.g. cancelled) without copying them back."""
        for rid in request_ids:
            self._swapped.pop(rid, None)

    def _ids(
        self, block_tables: Mapping[Hashable, Sequence[int]], *, unique: bool, what: str
    ) -> torch.Tensor:
        try:
            flat = [operator.index(b) for table in block_tables.values() for b in table]
        except TypeError as exc:
            raise TypeError(f"{what}: block tables must hold ints ({exc})") from None
        ids = torch.tensor(flat, dtype=torch.int64)
        check_block_ids(ids, self._num_blocks, unique=unique, what=what)
        return ids

    def _runs(self, block_tables: Mapping[Hashable, Sequence[int]], skip: Mapping[Hashable, int]):
        """Group requests whose host records are adjacent in one extent into one copy each."""
        items = sorted(
            ((self._swapped[rid], skip.get(rid, 0), table) for rid, table in block_tables.items()),
            key=lambda it: (id(it[0].extent), it[0].start),
        )
        runs: list[tuple[torch.Tensor, int, int, list[int]]] = []
        for s, first, table in items:
            start, stop = s.start + first, s.start + s.count
            last = runs[-1] if runs else None
            if last is not None and last[0] is s.extent and last[2] == start:
                runs[-1] = (last[0], last[1], stop, last[3] + list(table))
            elif stop > start:
                runs.append((s.extent, start, stop, list(table)))
        return [(e, a, b, torch.tensor(ids, dtype=torch.int64)) for e, a, b, ids in runs]

    def _gather(self, ids: torch.Tensor, out: torch.Tensor) -> None:
        if self.backend == "native":
            torch.ops.teola_kvswap.gather(self.caches, ids, out, self.block_dim)
        else:
            gather_blocks(self._layers, ids.tolist(), out, self._record_bytes)

    def _scatter(self, src: torch.Tensor, ids: torch.Tensor) -> None:
        if self.backend == "native":
            torch.ops.teola_kvswap.scatter(src, self.caches, ids, self.block_dim)
        else:
            scatter_blocks(src, self._layers, ids.tolist(), self._record_bytes)

    def _copies(self, blocks: int, runs: int) -> int:
        return runs if self.backend == "native" else blocks * len(self._layers)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()
