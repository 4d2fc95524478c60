"""OTLP tracer and meter providers configured from the standard OTEL_* environment variables."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

PROTOCOLS = ("http/protobuf", "grpc")


def otlp_providers() -> tuple[Any, Any]:
    """(TracerProvider, MeterProvider) exporting over OTLP; the exporters read the endpoint and
    headers from the environment themselves. Both flush at interpreter exit."""
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol not in PROTOCOLS:
        raise ValueError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: teola exports with one of {', '.join(PROTOCOLS)}"
        )
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "teola"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    # trace-only back ends (Langfuse, Phoenix) take no metrics: OTEL_METRICS_EXPORTER=none skips them
    metrics_off = os.environ.get("OTEL_METRICS_EXPORTER", "").strip().lower() == "none"
    readers = [] if metrics_off else [PeriodicExportingMetricReader(OTLPMetricExporter())]
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    return tracer_provider, meter_provider
