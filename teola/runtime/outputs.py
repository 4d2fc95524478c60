"""What a primitive writes to its query's object store once its engine answered: the reranker's best
texts, a prefill's state, a decode's text or items. Pure functions, like teola.runtime.requests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from teola.ir.ops import PREFILL_OPS, PrimOp
from teola.ir.primitive import Primitive
from teola.runtime.requests import PrimitiveInputError


def collect_outputs(
    prim: Primitive, requests: Sequence[Mapping[str, Any]], results: list[Any]
) -> dict[str, Any]:
    """The object-store values `prim` writes, from its requests and the engine's results."""
    op = prim.op
    if len(results) != len(requests):
        raise PrimitiveInputError(
            f"{prim.name}: engine returned {len(results)} results for {len(requests)} requests"
        )
    out = prim.outputs[0]
    if op is PrimOp.RERANKING:
        order = sorted(range(len(results)), key=lambda i: -float(results[i]))
        return {out: [requests[i]["text"] for i in order[: prim.args.get("top_n", 3)]]}
    if op in PREFILL_OPS:
        res = results[0] if isinstance(results[0], dict) else {}
        return {out: {"parts": requests[0]["parts"], **res}}
    if op is PrimOp.DECODING:
        return {out: decode_value(prim, results[0])}
    return {out: list(results)}


def decode_value(prim: Primitive, result: Any) -> Any:
    if not isinstance(result, dict):
        raise PrimitiveInputError(
            f"{prim.name}: a decode result must be a dict with 'text', got {type(result).__name__}"
        )
    if prim.args.get("split"):
        items = list(result.get("items", []))
        n = prim.args.get("n_items")
        return items[:n] if n else items
    return prim.args.get("start", "") + result.get("text", "")  # "start": what the turn began with (agent)
