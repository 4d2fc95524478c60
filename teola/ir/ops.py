"""Primitive operations (Teola Table 1, plus TOOL) and the op families passes reason about."""
from __future__ import annotations

import enum


class PrimOp(str, enum.Enum):
    """What a primitive does. Values are plain strings so they cross process boundaries as-is."""

    EMBEDDING = "embedding"
    INGESTION = "ingestion"
    SEARCHING = "searching"
    RERANKING = "reranking"
    PREFILLING = "prefilling"
    DECODING = "decoding"
    PARTIAL_PREFILLING = "partial_prefilling"
    FULL_PREFILLING = "full_prefilling"
    PARTIAL_DECODING = "partial_decoding"
    CONDITION = "condition"
    AGGREGATE = "aggregate"
    TOOL = "tool"

    def __str__(self) -> str:
        return self.value


LLM_OPS = frozenset({PrimOp.PREFILLING, PrimOp.DECODING, PrimOp.PARTIAL_PREFILLING,
                     PrimOp.FULL_PREFILLING, PrimOp.PARTIAL_DECODING})
PREFILL_OPS = frozenset({PrimOp.PREFILLING, PrimOp.PARTIAL_PREFILLING, PrimOp.FULL_PREFILLING})
DECODE_OPS = frozenset({PrimOp.DECODING, PrimOp.PARTIAL_DECODING})
# Ops run by the graph scheduler itself, on no engine.
CONTROL_OPS = frozenset({PrimOp.CONDITION, PrimOp.AGGREGATE})
# Ops whose work splits into independent per-item requests (stage decomposition applies).
BATCHABLE_OPS = frozenset({PrimOp.EMBEDDING, PrimOp.INGESTION, PrimOp.RERANKING, PrimOp.SEARCHING})
