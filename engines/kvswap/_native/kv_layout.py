"""Python mirror of csrc/kvswap_plan.cpp: validates a swap and describes each layer's blocks as byte
chunks. Used to raise clear `ValueError`s before any copy and by the per-block fallback.

A layer's cache is seen as [outer, num_blocks, inner...] with `block_dim` the block dimension:
0 for vLLM 0.32's [num_blocks, num_kv_heads, block_size, 2 * head_size] (CPU and GPU backends),
1 for the older [2, num_blocks, block_size, num_kv_heads, head_size]. A block record in a swap buffer
is every layer's (plane, block) chunks back to back, in layer then plane order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(slots=True, frozen=True)
class LayerChunks:
    """Where one layer's blocks live: a uint8 view [outer, num_blocks, inner_bytes] over its memory."""

    raw: torch.Tensor
    num_blocks: int
    record_offset: int

    @property
    def chunk_bytes(self) -> int:
        return self.raw.shape[0] * self.raw.shape[2]


def _byte_view(t: torch.Tensor, block_dim: int, layer: int) -> torch.Tensor:
    if block_dim not in (0, 1):
        raise ValueError(
            f"block_dim must be 0 ([num_blocks, ...]) or 1 ([2, num_blocks, ...]), got {block_dim}"
        )
    if t.dim() < block_dim + 2:
        raise ValueError(
            f"cache of layer {layer} has shape {tuple(t.shape)}; expected at least "
            f"{block_dim + 2} dims with blocks on dim {block_dim}"
        )
    inner = sorted((t.stride(d), t.size(d)) for d in range(block_dim + 1, t.dim()))
    expect = 1
    for stride, size in inner:
        if size == 1:
            continue
        if stride != expect:
            raise ValueError(
                f"cache of layer {layer} (shape {tuple(t.shape)}, strides {t.stride()}) "
                f"does not keep one block's data contiguous after dim {block_dim}"
            )
        expect *= size
    if not _non_overlapping_dense(t):
        raise ValueError(
            f"cache of layer {layer} must be a dense tensor (shape {tuple(t.shape)}, strides {t.stride()})"
        )
    es = t.element_size()
    outer = t.size(0) if block_dim == 1 else 1
    inner_bytes = expect * es
    storage = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
    return storage.as_strided(
        (outer, t.size(block_dim), inner_bytes),
        (t.stride(0) * es if block_dim == 1 else 0, t.stride(block_dim) * es, 1),
        t.storage_offset() * es,
    )


def _non_overlapping_dense(t: torch.Tensor) -> bool:
    order = sorted(range(t.dim()), key=lambda d: t.stride(d))
    expect = 1
    for d in order:
        if t.size(d) == 1:
            continue
        if t.stride(d) != expect:
            return False
        expect *= t.size(d)
    return True


def describe_layers(caches: Sequence[torch.Tensor], block_dim: int) -> tuple[list[LayerChunks], int]:
    """Validate `caches` and return (per-layer chunk views, bytes of one block record)."""
    if not caches:
        raise ValueError("caches is empty: pass one KV-cache tensor per layer")
    device = caches[0].device
    out: list[LayerChunks] = []
    offset = 0
    outer = None
    for i, t in enumerate(caches):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"cache of layer {i} is a {type(t).__name__}, not a torch.Tensor")
        if t.device != device:
            raise ValueError(
                f"cache of layer {i} is on {t.device}, layer 0 on {device}; all layers must share one device"
            )
        raw = _byte_view(t, block_dim, i)
        if outer is None:
            outer = raw.shape[0]
        elif raw.shape[0] != outer:
            raise ValueError(f"layer {i} has {raw.shape[0]} planes, layer 0 has {outer}")
        out.append(LayerChunks(raw, t.size(block_dim), offset))
        offset += raw.shape[0] * raw.shape[2]
    return out, offset


def check_block_ids(ids: torch.Tensor, num_blocks: int, *, unique: bool, what: str) -> None:
    """Raise ValueError if an id is outside [0, num_blocks) or (when `unique`) repeated."""
    if ids.numel() == 0:
        return
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= num_blocks:
        bad = lo if lo < 0 else hi
        raise ValueError(f"{what}: block id {bad} is out of range [0, {num_blocks})")
    if unique and torch.unique(ids).numel() != ids.numel():
        vals, counts = torch.unique(ids, return_counts=True)
        raise ValueError(
            f"{what}: block id {int(vals[counts > 1][0])} appears twice; "
            "each destination block may be written once"
        )
