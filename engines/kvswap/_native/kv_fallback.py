"""Per-block copy loop with the same buffer format as the native kernel: one `copy_` per
(block, layer), the way vLLM's swap_blocks issues one copy per block. Used when the extension is not
built, and as the baseline in `python -m bench kv_swap` (bench/studies/kv/kv_swap.py)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engines.kvswap._native.kv_layout import LayerChunks


def gather_blocks(
    layers: Sequence[LayerChunks], ids: Sequence[int], out: torch.Tensor, record_bytes: int
) -> None:
    """Copy blocks `ids` of every layer into `out` (uint8 [len(ids), record_bytes])."""
    rows = out.view(len(ids), record_bytes)
    for i, b in enumerate(ids):
        for layer in layers:
            dst = rows[i, layer.record_offset : layer.record_offset + layer.chunk_bytes]
            dst.view(layer.raw.shape[0], layer.raw.shape[2]).copy_(layer.raw[:, b], non_blocking=True)


def scatter_blocks(
    src: torch.Tensor, layers: Sequence[LayerChunks], ids: Sequence[int], record_bytes: int
) -> None:
    """Copy records of `src` (uint8 [len(ids), record_bytes]) into blocks `ids` of every layer."""
    rows = src.view(len(ids), record_bytes)
    for i, b in enumerate(ids):
        for layer in layers:
            chunk = rows[i, layer.record_offset : layer.record_offset + layer.chunk_bytes]
            layer.raw[:, b].copy_(chunk.view(layer.raw.shape[0], layer.raw.shape[2]), non_blocking=True)
