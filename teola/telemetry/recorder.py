"""`Telemetry`: turns a finished (or failed) query into OpenTelemetry spans and GenAI metrics.

One span per query (`query {app}`), one child span per primitive of its e-graph. A span tree cannot
hold a DAG, so every primitive span is a child of the query span and carries one span link per
e-graph parent (attribute `teola.link` = "parent") plus `teola.parents` (their names): a tracing UI
shows the primitives under the query and the links give the exact dataflow. A call through the
OpenAI-compatible door is one span of its own (`record_call`), in its caller's trace when the
request carried a W3C traceparent. A primitive span starts
when the primitive was queued at its engine and ends when it finished; its `teola.queued` and
`teola.started` events mark queueing vs running. Requires the `opentelemetry-api` package
(`pip install teola[otel]`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace as otel_trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from teola.telemetry.attributes import call_attributes, primitive_attributes, span_name
from teola.telemetry.metrics import GenAIMetrics
from teola.trace.timeline import critical_path, interval

SCOPE = "teola"
NS = 1_000_000_000


class Telemetry:
    """Records queries as spans on `tracer_provider` and GenAI metrics on `meter_provider` (either
    None: OpenTelemetry's global provider). `capture_content`: also record the question and the
    answer text on the query span (`gen_ai.input.messages` / `gen_ai.output.messages`); off by
    default, since prompts and answers may hold personal data."""

    def __init__(
        self, tracer_provider: Any = None, meter_provider: Any = None, capture_content: bool = False
    ) -> None:
        self.tracer = otel_trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        self.metrics = GenAIMetrics(meter_provider)
        self.capture_content = bool(capture_content)

    def record(
        self,
        app: str,
        compiled: Any,
        trace: list[dict[str, Any]],
        start_ns: int,
        engines: Mapping[str, Any],
        result: Any = None,
        error: BaseException | None = None,
    ) -> None:
        """Emit the spans and metrics of one query. compiled: its `Compiled`; trace: its per-primitive
        trace; start_ns: wall-clock time (time.time_ns()) its trace times count from; engines: the
        app's Engine registrations by name; result: its Result (None when it failed with `error`)."""
        egraph = compiled.egraph
        prims = {p.name: p for p in egraph.primitives}
        parents = {p.name: [q.name for q in egraph.parents(p)] for p in prims.values()}
        latency = (
            result.latency
            if result is not None
            else max((e.get("finished") or e.get("queued") or 0) for e in trace)
            if trace
            else 0.0
        )
        on_path = set(critical_path(trace, parents))
        root = self.tracer.start_span(
            f"query {app}",
            kind=SpanKind.SERVER,
            start_time=start_ns,
            attributes=self._query_attributes(app, compiled, trace, result),
        )
        root_ctx = otel_trace.set_span_in_context(root)
        contexts: dict[str, Any] = {}
        entries = {str(e.get("primitive")): e for e in trace}
        for p in egraph.primitives:  # topological: parents' spans exist before their children's
            entry = entries.get(p.name)
            if entry is None:
                continue  # never dispatched (the query failed first)
            spec = engines.get(p.engine) if p.engine else None
            model = (getattr(spec, "options", None) or {}).get("model") if spec is not None else None
            kind = getattr(spec, "kind", None)
            attrs = primitive_attributes(entry, p.op, p.args, kind, model)
            attrs["teola.parents"] = parents[p.name]
            attrs["teola.critical_path"] = p.name in on_path
            links = [Link(contexts[q], {"teola.link": "parent"}) for q in parents[p.name] if q in contexts]
            span = self._primitive_span(
                entry,
                attrs,
                links,
                root_ctx,
                start_ns,
                span_name(p.op, p.name, p.engine, model, attrs.get("gen_ai.tool.name")),
            )
            contexts[p.name] = span.get_span_context()
            self.metrics.observe(entry, p.op, attrs)
        if error is not None:
            root.record_exception(error)
            root.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        root.end(end_time=start_ns + int(latency * NS))

    def record_call(
        self,
        app: str,
        entry: dict[str, Any],
        request: dict[str, Any],
        start_ns: int,
        kind: str | None,
        model: str | None,
        operation: str,
        parent: Any = None,
        error: BaseException | None = None,
    ) -> None:
        """Emit the span of one program call from the OpenAI-compatible door (`{operation} {model}`,
        kind SERVER). entry: its trace dict (times in seconds from start_ns, usage, finish reason);
        request: its LLM request; parent: the caller's context (its W3C traceparent), None for a
        new trace."""
        attrs = call_attributes(app, entry, request, kind, model, operation)
        span = self.tracer.start_span(
            f"{operation} {model or entry.get('engine')}",
            context=parent,
            kind=SpanKind.SERVER,
            start_time=start_ns,
            attributes=attrs,
        )
        if isinstance(entry.get("started"), (int, float)):
            span.add_event("teola.started", timestamp=start_ns + int(entry["started"] * NS))
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end(end_time=start_ns + int(float(entry.get("finished") or 0.0) * NS))

    def _primitive_span(
        self,
        entry: dict[str, Any],
        attrs: dict[str, Any],
        links: list[Link],
        ctx: Any,
        start_ns: int,
        name: str,
    ) -> Any:
        q = entry.get("queued") or 0.0
        iv = interval(entry)
        kind = SpanKind.CLIENT if attrs.get("teola.engine") else SpanKind.INTERNAL  # control ops run in teola
        span = self.tracer.start_span(
            name, context=ctx, kind=kind, start_time=start_ns + int(q * NS), attributes=attrs, links=links
        )
        span.add_event("teola.queued", timestamp=start_ns + int(q * NS))
        if iv is not None:
            span.add_event(
                "teola.started",
                {"teola.batch_size": int(entry.get("batch_size") or 0)},
                timestamp=start_ns + int(iv[1] * NS),
            )
        status = entry.get("status")
        if status not in ("ok", "skipped"):
            span.set_status(Status(StatusCode.ERROR, f"primitive {status}"))
        end = iv[2] if iv is not None else q
        span.end(end_time=start_ns + int(end * NS))
        return span

    def _query_attributes(
        self, app: str, compiled: Any, trace: list[dict[str, Any]], result: Any
    ) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "teola.api.app": app,
            "teola.query_id": compiled.query_id,
            "teola.primitives": len(compiled.egraph),
            "teola.graph_cache_hit": compiled.cache_hit,
            "teola.passes": list(compiled.passes_applied),
            "teola.compile_seconds": float(compiled.seconds),
        }
        if result is not None:
            attrs["teola.latency_seconds"] = float(result.latency)
            attrs["teola.skipped"] = bool(result.skipped)
        if self.capture_content:
            question = compiled.inputs.get("query.question")
            if isinstance(question, str):
                attrs["gen_ai.input.messages"] = _messages("user", question)
            if result is not None and result.output is not None:
                out = (
                    result.output
                    if isinstance(result.output, str)
                    else json.dumps(result.output, default=str)
                )
                attrs["gen_ai.output.messages"] = _messages("assistant", out)
        return attrs


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])
