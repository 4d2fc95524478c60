"""Primitive semantics before the engine: what requests a primitive sends to its engine (the
segments of a call that pauses for tools included), how control primitives evaluate, and when a
primitive is skipped. What it writes back is teola.runtime.outputs; the fields a pausing call's
segments add are teola.runtime.pausing_segments. Pure functions over `values` (the object store:
key -> value); no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engines.requests import (
    EmbeddingRequest,
    IngestionRequest,
    LLMRequest,
    RerankRequest,
    TextSearchRequest,
    ToolRequest,
    VectorSearchRequest,
    default,
)
from teola.ir.ops import CONTROL_OPS, PREFILL_OPS, PrimOp
from teola.ir.primitive import Primitive
from teola.ir.refs import Ref, key_range
from teola.runtime.executors.ray_data import KEEP
from teola.runtime.pausing_segments import segment_fields, tool_requests
from teola.scheduling.dispatch_record import frozen_body


class PrimitiveInputError(ValueError):
    """A primitive's inputs in the object store do not have the shape its op needs."""


# ---- primitives that need no engine ----------------------------------------------------------------
@dataclass(slots=True)
class AtOnce:
    """A ready primitive done without an engine: its outputs, or `skipped` (it writes none)."""

    outputs: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False


def at_once(
    prim: Primitive, values: dict[str, Any], skipped: set[str] | frozenset[str], control: bool
) -> AtOnce | None:
    """What a primitive whose parents are done does at once: it is skipped (`is_skipped`), or it is
    a control op the graph scheduler evaluates itself (`run_control`). None: it goes to its engine."""
    if is_skipped(prim, values, skipped):
        return AtOnce(skipped=True)
    if control:
        return AtOnce(run_control(prim, values, skipped))
    return None


# ---- skipping -----------------------------------------------------------------------------------
def is_skipped(prim: Primitive, values: dict[str, Any], skipped: set[str] | frozenset[str]) -> bool:
    """Whether `prim` is skipped: its guard (`args["guard"]`, a condition's branch key) is skipped or
    not True, or it reads a skipped key. An AGGREGATE in mode "first" is skipped only when every
    one of its data inputs is."""
    guard = prim.args.get("guard")
    if guard is not None and (guard in skipped or values.get(guard) is not True):
        return True
    if not skipped:
        return False
    if prim.op is PrimOp.AGGREGATE and prim.args.get("mode", "first") == "first":
        data = [k for k in prim.inputs if k != guard]
        return bool(data) and all(k in skipped for k in data)
    return any(k in skipped for k in prim.inputs)


# ---- value helpers ------------------------------------------------------------------------------
def texts_of(value: Any) -> list[str]:
    """A value as a flat list of texts: a str is one text; lists flatten in order; a dict gives its
    "text" field; anything else its str()."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [str(value.get("text", ""))]
    if isinstance(value, (list, tuple)):
        out: list[str] = []
        for v in value:
            if isinstance(v, str):
                out.append(v)
            else:
                out.extend(texts_of(v))
        return out
    if value is None:
        return []
    return [str(value)]


def resolve_part(src: str | Ref, values: dict[str, Any]) -> str:
    """The text of one prompt part: a literal, or a Ref resolved against the object store
    (`index` -> that item or "" if missing; `index`+`stop` -> those items joined; `join` -> joined
    texts; a list alone joins with blank lines)."""
    if isinstance(src, str):
        return src
    if not isinstance(src, Ref):
        raise PrimitiveInputError(f"prompt part source must be a str or Ref, got {src!r}")
    if src.key not in values:
        raise PrimitiveInputError(f"prompt part reads {src.key!r}, which is not in the object store")
    v = values[src.key]
    if isinstance(v, str) and src.index is None:
        return v
    texts = texts_of(v)
    if src.index is not None and src.stop is not None:
        texts = texts[src.index : src.stop]
    elif src.index is not None:
        return texts[src.index] if 0 <= src.index < len(texts) else ""
    return (src.join if src.join is not None else "\n\n").join(texts)


def resolve_parts(parts: Iterable[tuple[str, str | Ref]], values: dict[str, Any]) -> list[list[str]]:
    return [[name, resolve_part(src, values)] for name, src in parts]


def map_items(prim: Primitive, values: dict[str, Any]) -> tuple[int, list[tuple[Any, ...]]]:
    """The aligned items a map primitive works on, and the absolute index of the first item.

    Each key in `args["map"]` holds a list (a part key `k#a:b` holds items [a, b)); a scalar counts
    as a one-item list; `args["slice"] = (a, b)` selects absolute items [a, b)."""
    keys = prim.args["map"]
    sl = prim.args.get("slice")
    columns = []
    first = 0
    for j, k in enumerate(keys):
        if k not in values:
            raise PrimitiveInputError(f"{prim.name}: maps over {k!r}, which is not in the object store")
        v = values[k]
        items = list(v) if isinstance(v, (list, tuple)) else [v]
        r = key_range(k)
        start = r[0] if r is not None else 0
        if sl is not None:
            a, b = sl
            items = items[max(0, a - start) : max(0, b - start)]
            offset = a
        else:
            offset = start
        if j == 0:
            first = offset
        columns.append(items)
    n = len(columns[0]) if columns else 0
    for k, col in zip(keys, columns):
        if len(col) != n:
            raise PrimitiveInputError(
                f"{prim.name}: map inputs are not aligned ({keys[0]!r} has {n} items, {k!r} has {len(col)})"
            )
    return first, list(zip(*columns))


# ---- requests -----------------------------------------------------------------------------------
def llm_request(parts: list[list[str]], complete: bool, gen: dict[str, Any]) -> LLMRequest:
    """One LLM request body (engines/protocol.py); "ignore_eos" is added only when `gen` turns it on,
    and "max_items" when a split output asks for a fixed number of items (`n_items`): the engine
    stops decoding once that many items are out instead of running on to max_tokens. Its engine
    priority is no body field: the dispatch record holds it (the query's is handed in at submission)."""
    req: LLMRequest = {
        "parts": parts,
        "complete": complete,
        "max_tokens": default(gen, "max_tokens"),
        "temperature": default(gen, "temperature"),
        "stop": default(gen, "stop"),
        "split": default(gen, "split"),
    }
    if gen.get("ignore_eos"):
        req["ignore_eos"] = True
    if gen.get("split") and gen.get("n_items"):
        req["max_items"] = int(gen["n_items"])
    return req


def kv_value(values: dict[str, Any], prim: Primitive) -> dict[str, Any]:
    key = prim.inputs[0]
    kv = values.get(key)
    if not isinstance(kv, dict) or "parts" not in kv:
        raise PrimitiveInputError(
            f"{prim.name}: expects the prefill state under {key!r}, got {type(kv).__name__}"
        )
    return kv


def build_requests(
    prim: Primitive, values: dict[str, Any], fused: Primitive | None = None
) -> list[dict[str, Any]]:
    """The engine requests of one primitive (engines/requests.py types), in item order. `fused`: the
    decode a prefill is fused into (dependent pre-scheduling: one decoding request over the full prompt)."""
    if fused is not None:
        return [fused_request(prim, fused, values)]
    op = prim.op
    a = prim.args
    if op is PrimOp.EMBEDDING:
        _, items = map_items(prim, values)
        return [EmbeddingRequest(text=_text(it[0], prim)) for it in items]
    if op is PrimOp.INGESTION:
        ns = _staging(values, prim) or _namespace(values, prim)
        first, items = map_items(prim, values)
        if len(a["map"]) < 2:
            raise PrimitiveInputError(
                f"{prim.name}: ingestion maps over (embeddings, chunks), got {a['map']!r}"
            )
        return [
            IngestionRequest(namespace=ns, text=_text(chunk, prim), embedding=emb, meta={"chunk": first + i})
            for i, (emb, chunk, *_) in enumerate(items)
        ]
    if op is PrimOp.SEARCHING:
        top_k = default(a, "top_k")
        _, items = map_items(prim, values)
        if a.get("text_query"):
            return [TextSearchRequest(query=_text(it[0], prim), top_k=top_k) for it in items]
        ns = _namespace(values, prim)
        exact = bool(a.get("own_namespace"))  # the query's own chunks only: an exact scan is cheap
        reqs = [VectorSearchRequest(namespace=ns, embedding=it[0], top_k=top_k, exact=exact) for it in items]
        stage = _staging(values, prim)
        if stage is not None:  # the query's own documents, not yet published into the kept namespace
            for r in reqs:
                r["staging"] = stage
        return reqs
    if op is PrimOp.RERANKING:
        question, texts = _rerank_inputs(prim, values)
        return [RerankRequest(query=question, text=t) for t in texts]
    if op in PREFILL_OPS:
        parts = resolve_parts(a["parts"], values)
        return [llm_request(parts, op is not PrimOp.PARTIAL_PREFILLING, {"max_tokens": 1})]
    if op is PrimOp.DECODING or op is PrimOp.PARTIAL_DECODING:
        # a segment continuing a call that paused for a tool has no prefill of its own (its prompt
        # is its first segment's, its continuation what the call wrote since: segment_fields)
        parts = (
            resolve_parts(a["parts"], values) if a.get("continuation") else kv_value(values, prim)["parts"]
        )
        return [{**llm_request(parts, True, a), **segment_fields(a, values)}]
    if op is PrimOp.TOOL and a.get("parse") == "tag":
        return tool_requests(a, values.get(prim.inputs[0]))
    if op is PrimOp.TOOL:
        _, items = map_items(prim, values)
        allowed = a.get("allowed") or []
        return [_tool_call(it[0], allowed, prim) for it in items]
    raise PrimitiveInputError(f"{prim.name}: op {op} does not run on an engine")


def frozen_bodies(
    requests: list[dict[str, Any]], *, stream_text: bool, keep: bool, cache_salt: str | None
) -> list[Mapping[str, Any]]:
    """The requests of one dispatch as the read-only bodies the graph tier queues, with its own
    fields built in: "stream_text" (the answer's tokens go to the query's on_event as they decode),
    KEEP (the results stay in the executor's object store, teola.runtime.executors.ray_data) and
    "cache_salt" (the query's salt of the LLM engines' prefix-cache keys). A field that does not
    apply is left out."""
    own: dict[str, Any] = {}
    if stream_text:
        own["stream_text"] = True
    if keep:
        own[KEEP] = True
    if cache_salt is not None:
        own["cache_salt"] = cache_salt
    return [frozen_body({**r, **own}) for r in requests]


def fused_request(prefill: Primitive, decode: Primitive, values: dict[str, Any]) -> dict[str, Any]:
    """Dependent pre-scheduling: one decoding request over the prefill's full prompt."""
    return {
        **llm_request(resolve_parts(prefill.args["parts"], values), True, decode.args),
        **segment_fields(decode.args, values),
    }


# ---- control ops --------------------------------------------------------------------------------
def run_control(
    prim: Primitive, values: dict[str, Any], skipped: set[str] | frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Evaluate a CONDITION or AGGREGATE primitive (run by the graph scheduler itself)."""
    a = prim.args
    guard = a.get("guard")
    data = [k for k in prim.inputs if k != guard]
    if prim.op is PrimOp.CONDITION:
        text = "\n".join(texts_of(values.get(data[0]))) if data else ""
        want = str(a.get("value", ""))
        if not a.get("case_sensitive", False):
            text, want = text.lower(), want.lower()
        pred = a.get("predicate")
        if pred == "contains":
            ok = want in text
        elif pred == "not_contains":
            ok = want not in text
        elif pred == "equals":
            ok = text.strip() == want.strip()
        else:
            raise PrimitiveInputError(
                f"{prim.name}: unknown predicate {pred!r}; use contains, not_contains or equals"
            )
        return {prim.outputs[0]: ok}
    if prim.op is PrimOp.AGGREGATE:
        mode = a.get("mode", "first")
        if mode == "concat":
            acc: list[Any] = []
            for k in data:
                v = values.get(k)
                acc.extend(v if isinstance(v, (list, tuple)) else [v])
            return {prim.outputs[0]: acc}
        if mode == "join":
            return {
                prim.outputs[0]: a.get("sep", "\n\n").join(t for k in data for t in texts_of(values.get(k)))
            }
        if mode == "first":
            for k in data:
                if k not in skipped:
                    return {prim.outputs[0]: values.get(k)}
            return {prim.outputs[0]: None}
        raise PrimitiveInputError(f"{prim.name}: unknown aggregate mode {mode!r}; use first, concat or join")
    raise PrimitiveInputError(
        f"{prim.name}: op {prim.op} is not a control op ({sorted(o.value for o in CONTROL_OPS)})"
    )


# ---- helpers ------------------------------------------------------------------------------------
def _text(v: Any, prim: Primitive) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and "text" in v:
        return str(v["text"])
    raise PrimitiveInputError(f"{prim.name}: expected text items, got {type(v).__name__}")


def _namespace(values: dict[str, Any], prim: Primitive) -> str:
    ns = values.get("sys.namespace")
    if not isinstance(ns, str):
        raise PrimitiveInputError(f"{prim.name}: needs the query namespace under 'sys.namespace'")
    return ns


def _staging(values: dict[str, Any], prim: Primitive) -> str | None:
    """The staging namespace this query ingests into on `prim`'s engine (teola.runtime.staging), if any."""
    return (values.get("sys.staging") or {}).get(prim.engine)


def _rerank_inputs(prim: Primitive, values: dict[str, Any]) -> tuple[str, list[str]]:
    question, results = None, None
    for k in prim.inputs:
        if k == prim.args.get("guard"):
            continue
        v = values.get(k)
        if question is None and isinstance(v, str):
            question = v
        elif results is None and isinstance(v, (list, tuple)):
            results = v
    if question is None or results is None:
        raise PrimitiveInputError(
            f"{prim.name}: reranking needs a question (str) and results (list) among {list(prim.inputs)}"
        )
    return question, list(dict.fromkeys(texts_of(results)))


def _tool_call(item: Any, allowed: list[str], prim: Primitive) -> dict[str, Any]:
    call = item
    if isinstance(item, str):
        try:
            call = json.loads(item)
        except json.JSONDecodeError as e:
            raise PrimitiveInputError(
                f"{prim.name}: tool call is not valid JSON ({e.msg}): {item[:200]!r}"
            ) from None
    if not isinstance(call, dict) or not isinstance(call.get("tool"), str):
        raise PrimitiveInputError(
            f'{prim.name}: a tool call must be {{"tool": name, "args": {{...}}}}, got {item!r}'
        )
    args = call.get("args", {})
    if not isinstance(args, dict):
        raise PrimitiveInputError(
            f"{prim.name}: tool {call['tool']!r}: 'args' must be an object, got {args!r}"
        )
    if call["tool"] not in allowed:  # an empty list allows no tool
        raise PrimitiveInputError(
            f"{prim.name}: tool {call['tool']!r} is not allowed here; allowed tools: "
            f"{', '.join(allowed) or 'none'}"
        )
    return ToolRequest(tool=call["tool"], args=args)
