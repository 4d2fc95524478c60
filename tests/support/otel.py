"""An OpenTelemetry SDK set-up that keeps spans and metrics in memory, and helpers to read them."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from teola.telemetry import Telemetry


class MemoryTelemetry:
    """A real Telemetry on in-memory SDK exporters: `.spans()`, `.metric_points(name)`."""

    def __init__(self, capture_content: bool = False) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.telemetry = Telemetry(provider, MeterProvider(metric_readers=[self.reader]), capture_content)

    def spans(self) -> list[Any]:
        return list(self.exporter.get_finished_spans())

    def metric_points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        return [
            pt
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == name
            for pt in m.data.data_points
        ]


def query_tree(spans: list[Any], query_id: str) -> tuple[Any, dict[str, Any]]:
    """(the query span, {primitive name: span}) of one query."""
    [root] = [s for s in spans if s.attributes.get("teola.query_id") == query_id]
    kids = {
        s.attributes["teola.ir.primitive"]: s
        for s in spans
        if s.parent is not None and s.parent.span_id == root.context.span_id
    }
    return root, kids
