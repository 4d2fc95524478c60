"""OpenTelemetry for teola queries: spans per query and primitive, GenAI metrics.

Off unless asked for. `telemetry_from_env()` (what every `App` uses) exports over OTLP when
`OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set and returns None
otherwise; the standard OTLP variables apply (`OTEL_EXPORTER_OTLP_PROTOCOL` grpc or http/protobuf,
default http/protobuf; `OTEL_EXPORTER_OTLP_HEADERS`; `OTEL_SERVICE_NAME`, default "teola").
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` also records the question and answer text.
OpenTelemetry itself is an optional dependency (`pip install teola[otel]`): it is imported only
when telemetry is on. Tests and embedders set `app.telemetry = Telemetry(tracer_provider=...)`.
"""

from __future__ import annotations

import functools
import os
from typing import Any

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
CAPTURE_VAR = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
INSTALL_HINT = "pip install 'teola[otel]' (opentelemetry-sdk and opentelemetry-exporter-otlp)"


def capture_content_from_env() -> bool:
    """Whether OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT asks for prompt/answer text."""
    return os.environ.get(CAPTURE_VAR, "").strip().lower() in ("1", "true", "yes")


def Telemetry(*args: Any, **kwargs: Any) -> Any:  # noqa: N802 (a class made on first use)
    """`teola.telemetry.recorder.Telemetry` (imported on first use: OpenTelemetry is optional)."""
    try:
        from teola.telemetry.recorder import Telemetry as Recorder
    except ImportError as exc:
        raise ImportError(f"teola telemetry needs OpenTelemetry ({exc}); {INSTALL_HINT}") from exc
    return Recorder(*args, **kwargs)


@functools.lru_cache(maxsize=1)
def telemetry_from_env() -> Any:
    """The process's OTLP-exporting Telemetry when an OTLP endpoint variable is set, else None.
    Built once per process (one exporter and batch processor shared by every app)."""
    if not any(os.environ.get(v) for v in ENDPOINT_VARS):
        return None
    try:
        from teola.telemetry.otlp import otlp_providers
    except ImportError as exc:
        raise ImportError(
            f"{' or '.join(ENDPOINT_VARS)} is set, so teola exports OpenTelemetry spans, but "
            f"OpenTelemetry is not installed ({exc}); {INSTALL_HINT}, or unset the variable"
        ) from exc
    tracer_provider, meter_provider = otlp_providers()
    return Telemetry(tracer_provider, meter_provider, capture_content_from_env())
