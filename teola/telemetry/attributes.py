"""What each primitive of a finished query looks like as an OpenTelemetry span: its name and
attributes (GenAI semantic conventions for LLM calls, embeddings, retrieval and tools, plus teola's
own), computed from the query's trace entry, its e-graph primitive and its engine registration.
Pure functions over plain data: no OpenTelemetry import here."""

from __future__ import annotations

from typing import Any, TypeGuard

from engines.requests import default
from teola.ir.ops import DECODE_OPS, LLM_OPS, PREFILL_OPS, PrimOp

# engine kind -> gen_ai.provider.name (teola serves these engines itself; the kind names the runtime)
PROVIDERS = {"vllm": "vllm", "sentence_transformers": "sentence_transformers"}
OPERATIONS = {PrimOp.EMBEDDING: "embeddings", PrimOp.SEARCHING: "retrieval", PrimOp.TOOL: "execute_tool"}


def operation_name(op: PrimOp) -> str | None:
    """gen_ai.operation.name of a primitive op ("chat" for LLM ops: teola's vLLM engine applies the
    model's chat template), or None for ops outside the GenAI conventions (ingestion, reranking,
    control)."""
    if op in LLM_OPS:
        return "chat"
    return OPERATIONS.get(op)


def span_name(op: PrimOp, prim_name: str, engine: str | None, model: str | None, tool: str | None) -> str:
    """`{operation} {model}` for GenAI operations (the conventions' span name), `execute_tool {tool}`
    for tools, `retrieval {engine}` for searches, `teola.{op} {primitive}` otherwise."""
    operation = operation_name(op)
    if operation == "execute_tool":
        return f"execute_tool {tool or prim_name}"
    if operation == "retrieval":
        return f"retrieval {engine}"
    if operation is not None:
        return f"{operation} {model or engine}"
    return f"teola.{op.value} {prim_name}"


def primitive_attributes(
    entry: dict[str, Any], op: PrimOp, args: dict[str, Any], kind: str | None, model: str | None
) -> dict[str, Any]:
    """The span attributes of one primitive: teola.* always, gen_ai.* for GenAI operations.

    entry: the primitive's trace dict (Result.trace); args: its e-graph primitive's args; kind and
    model: its engine's registration (None for control primitives)."""
    attrs: dict[str, Any] = {
        "teola.op": op.value,
        "teola.ir.primitive": entry.get("primitive", ""),
        "teola.depth": int(entry.get("depth") or 0),
        "teola.status": entry.get("status", ""),
    }
    for key, name in (
        ("engine", "teola.engine"),
        ("instance", "teola.instance"),
        ("batch_id", "teola.batch_id"),
        ("batch_size", "teola.batch_size"),
        ("requests", "teola.requests"),
        ("fused_into", "teola.fused_into"),
        ("fused_with", "teola.fused_with"),
    ):
        if entry.get(key) is not None:
            attrs[name] = entry[key]
    queued, started, finished = entry.get("queued"), entry.get("started"), entry.get("finished")
    if _num(queued) and _num(started):
        attrs["teola.queue_seconds"] = max(0.0, started - queued)
    if _num(started) and _num(finished):
        attrs["teola.run_seconds"] = max(0.0, finished - started)
    operation = operation_name(op)
    if operation is None:
        return attrs
    attrs["gen_ai.operation.name"] = operation
    if kind is not None:
        attrs["gen_ai.provider.name"] = PROVIDERS.get(kind, kind)
    if model:
        attrs["gen_ai.request.model"] = model
    if op in LLM_OPS:
        attrs.update(llm_attributes(entry, op, args))
    elif op is PrimOp.TOOL and len(args.get("allowed") or ()) == 1:
        attrs["gen_ai.tool.name"] = args["allowed"][0]
    elif op is PrimOp.SEARCHING:
        attrs["gen_ai.data_source.id"] = entry.get("engine") or ""
        if args.get("top_k") is not None:
            attrs["gen_ai.request.top_k"] = int(args["top_k"])
    return attrs


def llm_attributes(entry: dict[str, Any], op: PrimOp, args: dict[str, Any]) -> dict[str, Any]:
    """Request settings and usage of an LLM primitive. A prefill is a request for one token (it
    fills the KV cache the decode continues from), so its max_tokens is 1 and it has no output."""
    prefill = op in PREFILL_OPS and not entry.get("fused_into")
    attrs: dict[str, Any] = {
        "gen_ai.request.max_tokens": 1 if prefill else int(default(args, "max_tokens")),
        "gen_ai.request.temperature": float(default(args, "temperature")),
    }
    usage = (
        ("num_prompt_tokens", "gen_ai.usage.input_tokens"),
        ("num_cached_tokens", "gen_ai.usage.cache_read.input_tokens"),
        ("num_output_tokens", "gen_ai.usage.output_tokens"),
    )
    for key, name in usage:
        if entry.get(key) is not None:
            attrs[name] = int(entry[key])
    if prefill:
        attrs.setdefault("gen_ai.usage.output_tokens", 0)
    if entry.get("finish_reason") and op in DECODE_OPS:
        attrs["gen_ai.response.finish_reasons"] = (str(entry["finish_reason"]),)
    return attrs


def _num(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def call_attributes(
    app: str,
    entry: dict[str, Any],
    request: dict[str, Any],
    kind: str | None,
    model: str | None,
    operation: str,
) -> dict[str, Any]:
    """The span attributes of one program call from the OpenAI-compatible door: `entry` is its
    trace dict (engine, instance, program, timings, usage, finish_reason), `request` its LLM
    request, `operation` "chat" or "text_completion"."""
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "teola.api.app": app,
        "teola.door": "openai",
        "gen_ai.response.id": entry.get("primitive", ""),
        "gen_ai.request.max_tokens": int(default(request, "max_tokens")),
        "gen_ai.request.temperature": float(default(request, "temperature")),
    }
    if request.get("top_p") is not None:
        attrs["gen_ai.request.top_p"] = float(request["top_p"])
    if request.get("seed") is not None:
        attrs["gen_ai.request.seed"] = int(request["seed"])
    if kind is not None:
        attrs["gen_ai.provider.name"] = PROVIDERS.get(kind, kind)
    if model:
        attrs["gen_ai.request.model"] = model
    for key, name in (
        ("engine", "teola.engine"),
        ("instance", "teola.instance"),
        ("program", "teola.program"),
        ("status", "teola.status"),
    ):
        if entry.get(key) is not None:
            attrs[name] = entry[key]
    if _num(entry.get("started")):
        attrs["teola.queue_seconds"] = max(0.0, entry["started"] - (entry.get("queued") or 0.0))
    for key, name in (
        ("num_prompt_tokens", "gen_ai.usage.input_tokens"),
        ("num_cached_tokens", "gen_ai.usage.cache_read.input_tokens"),
        ("num_output_tokens", "gen_ai.usage.output_tokens"),
    ):
        if entry.get(key) is not None:
            attrs[name] = int(entry[key])
    if entry.get("finish_reason"):
        attrs["gen_ai.response.finish_reasons"] = (str(entry["finish_reason"]),)
    return attrs
