"""`DoorCall`: what the server records of one call through the OpenAI-compatible door
(teola.server.openai.door), as it records a query: counted in /metrics (teola_server_queries, the
latency and per-primitive histograms, failures by reason), listed in the /ui recent list (kind
"openai"), and, when telemetry is on, one OpenTelemetry span in its caller's trace."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from teola.server.state import ServerState
from teola.telemetry import telemetry_from_env

log = logging.getLogger("teola.server")


class DoorCall:
    """One door call of `program` on `app`'s `engine`, from the moment it is admitted. `request`:
    its LLM request; `operation`: "chat" or "text_completion"; `parent`: the caller's trace context
    (teola.server.tracing.caller_context) or None; `prompt`: what the /ui list shows of it."""

    def __init__(
        self,
        state: ServerState,
        app_name: str,
        app: Any,
        engine: str,
        call_id: str,
        program: str,
        tenant: str,
        request: dict[str, Any],
        operation: str,
        parent: Any,
        prompt: str,
    ) -> None:
        self.state, self.app_name, self.app, self.engine = state, app_name, app, engine
        self.call_id, self.program, self.request, self.operation, self.parent = (
            call_id,
            program,
            request,
            operation,
            parent,
        )
        self.t0 = asyncio.get_running_loop().time()
        self.start_ns = time.time_ns()
        self.key = state.recent.begin_call(tenant, app_name, call_id, prompt)

    def finished(self, outcome: Any) -> None:
        """The call answered with `outcome` (a CallOutcome)."""
        entry = self._entry("ok", outcome)
        self.state.metrics.observe_query(self.app_name, entry["finished"], [entry])
        self.state.recent.finish_call(self.key, entry)
        self._span(entry, None)

    def failed(self, error: BaseException, reason: str | None) -> None:
        """The call ended without an answer; `reason` labels teola_server_queries_failed (None: not
        counted there, e.g. a cancellation, which is counted as cancelled)."""
        if reason is not None:
            self.state.metrics.failed.labels(self.app_name, reason).inc()
        entry = self._entry("cancelled" if reason is None else "failed", None)
        self.state.recent.finish_call(self.key, entry, error)
        self._span(entry, error)

    def _entry(self, status: str, outcome: Any) -> dict[str, Any]:
        """The call as a trace entry (times in seconds from its start), like a query's primitive."""
        entry: dict[str, Any] = {
            "primitive": self.call_id,
            "op": "decoding",
            "engine": self.engine,
            "program": self.program,
            "status": status,
            "queued": 0.0,
            "finished": asyncio.get_running_loop().time() - self.t0,
        }
        if outcome is not None:
            entry["instance"] = outcome.instance
            if outcome.started is not None:
                entry["started"] = max(0.0, outcome.started - self.t0)
            for key in ("num_prompt_tokens", "num_cached_tokens", "num_output_tokens", "finish_reason"):
                if outcome.result.get(key) is not None:
                    entry[key] = outcome.result[key]
        return entry

    def _span(self, entry: dict[str, Any], error: BaseException | None) -> None:
        telemetry = (
            self.app.telemetry if getattr(self.app, "telemetry", None) is not None else telemetry_from_env()
        )
        if telemetry is None:
            return
        spec = self.app.engines.get(self.engine)
        model = (getattr(spec, "options", None) or {}).get("model")
        try:
            telemetry.record_call(
                self.app_name,
                entry,
                self.request,
                self.start_ns,
                getattr(spec, "kind", None),
                model,
                self.operation,
                self.parent,
                error,
            )
        except Exception as exc:  # a recorder failure never fails the call
            log.warning(
                "app %s: recording call %s for OpenTelemetry failed: %s: %s",
                self.app_name,
                self.call_id,
                type(exc).__name__,
                exc,
            )
