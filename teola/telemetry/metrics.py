"""The GenAI client metrics of the OpenTelemetry semantic conventions, recorded per LLM or
embedding primitive: `gen_ai.client.operation.duration` (seconds, queued to finished) and
`gen_ai.client.token.usage` (tokens, `gen_ai.token.type` input or output)."""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics as otel_metrics

from teola.ir.ops import PREFILL_OPS, PrimOp
from teola.trace.timeline import interval

KEYS = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model")
# the conventions' advised bucket boundaries
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)


class GenAIMetrics:
    """The two GenAI histograms on `meter_provider` (None: the global one)."""

    def __init__(self, meter_provider: Any = None) -> None:
        meter = otel_metrics.get_meter("teola", meter_provider=meter_provider)
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS),
        )
        self._seen: set[tuple[Any, ...]] = set()

    def observe(self, entry: dict[str, Any], op: PrimOp, attrs: dict[str, Any]) -> None:
        """Record one primitive (its span attributes already computed). A prefill fused into its
        decode, and the members of one streamed decode after the first, are the same engine call:
        counted once."""
        if "gen_ai.operation.name" not in attrs or attrs["gen_ai.operation.name"] == "execute_tool":
            return
        if entry.get("fused_into") or (op in PREFILL_OPS and entry.get("status") != "ok"):
            return
        if op is PrimOp.PARTIAL_DECODING:
            call = (entry.get("batch_id"), entry.get("queued"))
            if call in self._seen:
                return
            self._seen.add(call)
            if len(self._seen) > 10_000:
                self._seen.clear()
        iv = interval(entry)
        if iv is None:
            return
        common = {k: attrs[k] for k in KEYS if k in attrs}
        self.duration.record(iv[2] - iv[0], common)
        for key, kind in (("gen_ai.usage.input_tokens", "input"), ("gen_ai.usage.output_tokens", "output")):
            if key in attrs:
                self.tokens.record(int(attrs[key]), {**common, "gen_ai.token.type": kind})
