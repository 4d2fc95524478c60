"""The emulator's /metrics: the Prometheus text of vLLM's own metric names, one series per emulated
engine (labels `model_name` and `engine`, as vLLM labels its data-parallel engines), plus the
process's CPU seconds (prometheus_client's `process_cpu_seconds_total`, which vLLM's /metrics also
carries), so CPU per request is process_cpu_seconds_total / vllm:request_success_total, and the
emulator's own `teola:emulator_lag_seconds` / `teola:emulator_max_lag_seconds`: how far an engine's
clock is (and was at most) behind the wall clock; a lag that stays up means the emulator process
lacks CPU and its latencies run long."""

from __future__ import annotations

import os
from collections.abc import Callable

from teola.emulate.pool import EngineState

# (name, type, help, value of an engine's state)
SERIES: tuple[tuple[str, str, str, Callable[[EngineState], float]], ...] = (
    (
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        lambda s: s.running,
    ),
    (
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        lambda s: s.waiting,
    ),
    ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", lambda s: s.kv_usage),
    (
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        lambda s: s.stats.get("prompt_tokens", 0),
    ),
    (
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        lambda s: s.generated,
    ),
    (
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        lambda s: s.stats.get("prompt_tokens", 0),
    ),
    (
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        lambda s: s.stats.get("cached_tokens", 0),
    ),
    (
        "vllm:num_preemptions_total",
        "counter",
        "Cumulative number of preemption from the engine.",
        lambda s: s.stats.get("preemptions", 0),
    ),
    (
        "teola:emulator_lag_seconds",
        "gauge",
        "Seconds the engine's last iteration started behind the wall clock.",
        lambda s: s.lag,
    ),
    (
        "teola:emulator_max_lag_seconds",
        "gauge",
        "Most seconds the engine has been behind the wall clock.",
        lambda s: s.max_lag,
    ),
)


def render(model: str, states: list[EngineState]) -> str:
    """The metrics page."""
    lines: list[str] = []
    for name, kind, doc, value in SERIES:
        lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]
        lines += [
            f'{name}{{engine="{i}",model_name="{model}"}} {float(value(s))}' for i, s in enumerate(states)
        ]
    name = "vllm:request_success_total"
    lines += [f"# HELP {name} Count of successfully processed requests.", f"# TYPE {name} counter"]
    for i, s in enumerate(states):
        for reason in ("stop", "length", "abort"):
            lines.append(
                f'{name}{{engine="{i}",finished_reason="{reason}",model_name="{model}"}} '
                f"{float(s.finished.get(reason, 0))}"
            )
    cpu = os.times()
    lines += [
        "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.",
        "# TYPE process_cpu_seconds_total counter",
        f"process_cpu_seconds_total {cpu.user + cpu.system}",
    ]
    return "\n".join(lines) + "\n"
