"""Primitive operations (Teola Table 1, plus TOOL) and the op families passes reason about. The op
names themselves live with the engine requests (engines/requests.py), which both sides import."""

from __future__ import annotations

from engines.requests import DECODE_OPS, LLM_OPS, PREFILL_OPS, PrimOp

# Ops run by the graph scheduler itself, on no engine.
CONTROL_OPS = frozenset({PrimOp.CONDITION, PrimOp.AGGREGATE})
# Ops whose work splits into independent per-item requests (stage decomposition applies).
BATCHABLE_OPS = frozenset({PrimOp.EMBEDDING, PrimOp.INGESTION, PrimOp.RERANKING, PrimOp.SEARCHING})

__all__ = ["BATCHABLE_OPS", "CONTROL_OPS", "DECODE_OPS", "LLM_OPS", "PREFILL_OPS", "PrimOp"]
