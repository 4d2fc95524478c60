"""Prometheus metrics of one server, in a registry of its own (several servers in one process do
not share counters). Query counters and per-primitive histograms are recorded by the server from
each query's trace; the runtimes' own counters (queue lengths, batches, prefix-cache hits) are read
at scrape time from ``app.runtime.stats()``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ServerMetrics:
    """The server's metrics. `registry` is what /metrics exposes."""

    def __init__(self, apps: Callable[[], Mapping[str, Any]]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.queries = Counter("teola_server_queries", "Queries received, by app.", ["app"], registry=r)
        self.failed = Counter(
            "teola_server_queries_failed",
            "Queries that ended in an error, by app and reason "
            "(invalid, engine, timeout, internal, limited: a tenant over its limits).",
            ["app", "reason"],
            registry=r,
        )
        self.cancelled = Counter(
            "teola_server_queries_cancelled",
            "Queries cancelled because their client went "
            "away before the answer (reason disconnect), by app; their engine work was "
            "dropped or aborted.",
            ["app", "reason"],
            registry=r,
        )
        self.query_latency = Histogram(
            "teola_server_query_latency_seconds",
            "End-to-end latency of answered queries.",
            ["app"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.op_latency = Histogram(
            "teola_primitive_latency_seconds",
            "Execution time of one primitive (started -> finished), by op and engine.",
            ["app", "op", "engine"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.op_queueing = Histogram(
            "teola_primitive_queueing_seconds",
            "Time a primitive waited in its engine queue (queued -> started).",
            ["app", "op", "engine"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_size = Histogram(
            "teola_primitive_batch_size",
            "Size of the engine batch each primitive ran in.",
            ["app", "engine"],
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.cached_tokens = Counter(
            "teola_prefix_cache_hit_tokens",
            "Prompt tokens served from the LLM prefix cache, from query traces.",
            ["app", "engine"],
            registry=r,
        )
        self.cache_hits = Counter(
            "teola_prefix_cache_hits",
            "LLM primitives with at least one cached prompt token.",
            ["app", "engine"],
            registry=r,
        )
        r.register(_RuntimeCollector(apps))

    def observe_query(self, app: str, latency: float, trace: Iterable[Mapping[str, Any]]) -> None:
        """Record an answered query and its per-primitive trace."""
        self.query_latency.labels(app).observe(max(0.0, float(latency)))
        for entry in trace:
            op = str(entry.get("op", "unknown"))
            engine = str(entry.get("engine") or "control")
            queued, started, finished = (_num(entry.get(k)) for k in ("queued", "started", "finished"))
            if started is not None and finished is not None:
                self.op_latency.labels(app, op, engine).observe(max(0.0, finished - started))
            if queued is not None and started is not None:
                self.op_queueing.labels(app, op, engine).observe(max(0.0, started - queued))
            if entry.get("fused_into"):
                continue  # a prefill fused into its decode: the decode's entry carries the batch and tokens
            size = _num(entry.get("batch_size"))
            if size:
                self.batch_size.labels(app, engine).observe(size)
            cached = _num(entry.get("num_cached_tokens", entry.get("cached_tokens")))
            if cached:
                self.cached_tokens.labels(app, engine).inc(cached)
                self.cache_hits.labels(app, engine).inc()

    def exposition(self) -> bytes:
        """Prometheus text exposition of everything in the registry."""
        return generate_latest(self.registry)


class _RuntimeCollector(Collector):
    """Reads each started app's runtime counters at scrape time."""

    def __init__(self, apps: Callable[[], Mapping[str, Any]]) -> None:
        self._apps = apps

    def describe(self) -> list:
        return []

    def collect(self) -> Iterable:
        ready = GaugeMetricFamily("teola_app_ready", "1 when the app's engines are started.", labels=["app"])
        up = GaugeMetricFamily(
            "teola_engine_up",
            "1 when every instance of the engine is healthy, 0 while one is down and restarting.",
            labels=["app", "engine"],
        )
        queue = GaugeMetricFamily(
            "teola_engine_queue_length", "Primitives waiting in an engine's queue.", labels=["app", "engine"]
        )
        batches = SummaryMetricFamily(
            "teola_engine_batch_size",
            "Batch sizes formed by the engine schedulers.",
            labels=["app", "engine"],
        )
        op_lat = SummaryMetricFamily(
            "teola_runtime_op_latency_seconds",
            "Primitive latency by op, as counted by the runtime.",
            labels=["app", "op"],
        )
        counters = {
            name: CounterMetricFamily(f"teola_runtime_{name}", f"Runtime counter {name!r}.", labels=["app"])
            for name in (
                "queries",
                "completed",
                "failed",
                "cancelled",
                "timed_out",
                "primitives",
                "prompt_tokens",
                "cached_tokens",
                "cache_hits",
                "aborted_requests",
                "engine_failures",
                "engine_restarts",
            )
        }
        for name, app in sorted(self._apps().items()):
            runtime = app.runtime
            ready.add_metric([name], 1.0 if runtime is not None else 0.0)
            if runtime is None:
                continue
            for engine, info in sorted(runtime.health().items()):
                up.add_metric([name, str(engine)], 1.0 if info.get("healthy", True) else 0.0)
            stats = runtime.stats()
            for engine, n in sorted(stats["queue_lengths"].items()):
                queue.add_metric([name, str(engine)], float(n))
            for engine, st in stats["batch_size"].items():
                batches.add_metric([name, str(engine)], count_value=st["count"], sum_value=st["sum"])
            for op, st in stats["op_latency"].items():
                op_lat.add_metric([name, str(op)], count_value=st["count"], sum_value=st["sum"])
            for key, family in counters.items():
                family.add_metric([name], float(stats[key]))
        yield ready
        yield up
        yield queue
        yield batches
        yield op_lat
        yield from counters.values()


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
