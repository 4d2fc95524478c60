"""Counters a server can export (`snapshot()` as a dict, `prometheus()` as Prometheus text)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from teola.runtime.errors import QueryCancelled, QueryError, QueryTimeout

COUNTERS = (
    "queries",
    "completed",
    "failed",
    "cancelled",
    "timed_out",
    "primitives",
    "skipped",
    "discarded",
    "dropped_warmups",
    "fused",
    "cleanup_failures",
    "prompt_tokens",
    "cached_tokens",
    "cache_hits",
    "aborted_requests",
    "engine_failures",
    "engine_restarts",
    "preemptions",
    "resumed_tokens",
    "resumed_cached_tokens",
    "resumed_swapped_tokens",
    "resumed_unrun",
)


@dataclass(slots=True)
class Stat:
    """count / sum / max of one observed quantity."""

    count: int = 0
    total: float = 0.0
    max: float = 0.0

    def add(self, v: float) -> None:
        self.count += 1
        self.total += v
        if v > self.max:
            self.max = v

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


@dataclass(slots=True, kw_only=True)
class Metrics:
    """Runtime-wide counters. `queue_lengths`: the runtime's engine -> queued primitives, given at
    construction."""

    queries: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    timed_out: int = 0
    primitives: int = 0
    skipped: int = 0
    discarded: int = (
        0  # speculative primitives whose condition said no (teola.runtime.graph_tier.speculation)
    )
    dropped_warmups: int = (
        0  # queued prefix warm-ups withdrawn so their call need not wait (teola.runtime.graph_tier.warmups)
    )
    fused: int = 0
    cleanup_failures: int = 0
    aborted_requests: int = 0  # engine requests stopped mid-run because their query ended
    engine_failures: int = 0  # engine instances found down (teola.runtime.engine_tier.supervisor)
    engine_restarts: int = 0  # ... and brought back
    preemptions: int = (
        0  # running LLM calls stopped for better-ranked ones (teola.runtime.engine_tier.preemption)
    )
    resumed_tokens: int = 0  # prompt tokens their resumed runs that ran sent again (prompt + decoded so far)
    resumed_cached_tokens: int = (
        0  # ... of which the engine did not compute (vLLM: prefix cache + host loads)
    )
    resumed_swapped_tokens: int = (
        0  # ... of those, what the engine reported loading from host memory (kv_swap)
    )
    resumed_unrun: int = (
        0  # resumed runs stopped again before the engine computed anything (not in the above)
    )
    query_latency: Stat = field(default_factory=Stat)
    op_latency: dict[str, Stat] = field(default_factory=dict)
    batch_size: dict[str, Stat] = field(default_factory=dict)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_hits: int = 0
    queue_lengths: Callable[[], dict[str, int]] = field(default=lambda: {})

    def query_ended(self, err: QueryError | None, latency: float) -> None:
        """A query ended: completed (its latency observed), cancelled, timed out or failed."""
        if err is None:
            self.completed += 1
            self.query_latency.add(latency)
        elif isinstance(err, QueryCancelled):
            self.cancelled += 1
        elif isinstance(err, QueryTimeout):
            self.timed_out += 1
        else:
            self.failed += 1

    def observe_op(self, op: str, seconds: float) -> None:
        s = self.op_latency.get(op)
        if s is None:
            s = self.op_latency[op] = Stat()
        s.add(seconds)

    def observe_batch(self, engine: str, size: int) -> None:
        s = self.batch_size.get(engine)
        if s is None:
            s = self.batch_size[engine] = Stat()
        s.add(size)

    def observe_llm(self, result: object) -> None:
        if isinstance(result, dict):
            self.prompt_tokens += int(result.get("num_prompt_tokens") or 0)
            cached = int(result.get("num_cached_tokens") or 0)
            self.cached_tokens += cached
            self.cache_hits += cached > 0

    def snapshot(self) -> dict:
        def stats(d: dict[str, Stat]) -> dict:
            return {
                k: {"count": s.count, "sum": s.total, "mean": s.mean, "max": s.max}
                for k, s in sorted(d.items())
            }

        return {
            **{name: getattr(self, name) for name in COUNTERS},
            "query_latency": {
                "count": self.query_latency.count,
                "mean": self.query_latency.mean,
                "max": self.query_latency.max,
            },
            "op_latency": stats(self.op_latency),
            "batch_size": stats(self.batch_size),
            "prefix_cache": {
                "prompt_tokens": self.prompt_tokens,
                "cached_tokens": self.cached_tokens,
                "hits": self.cache_hits,
            },
            "queue_lengths": dict(self.queue_lengths()),
        }

    def prometheus(self, prefix: str = "teola") -> str:
        """The counters in Prometheus text exposition format."""
        out = []
        for name in COUNTERS:
            out.append(f"# TYPE {prefix}_{name}_total counter")
            out.append(f"{prefix}_{name}_total {getattr(self, name)}")
        out.append(f"# TYPE {prefix}_query_latency_seconds summary")
        out.append(f"{prefix}_query_latency_seconds_count {self.query_latency.count}")
        out.append(f"{prefix}_query_latency_seconds_sum {self.query_latency.total}")
        out.append(f"# TYPE {prefix}_op_latency_seconds summary")
        for op, s in sorted(self.op_latency.items()):
            out.append(f'{prefix}_op_latency_seconds_count{{op="{op}"}} {s.count}')
            out.append(f'{prefix}_op_latency_seconds_sum{{op="{op}"}} {s.total}')
        out.append(f"# TYPE {prefix}_batch_size summary")
        for eng, s in sorted(self.batch_size.items()):
            out.append(f'{prefix}_batch_size_count{{engine="{eng}"}} {s.count}')
            out.append(f'{prefix}_batch_size_sum{{engine="{eng}"}} {s.total}')
        out.append(f"# TYPE {prefix}_queue_length gauge")
        for eng, n in sorted(self.queue_lengths().items()):
            out.append(f'{prefix}_queue_length{{engine="{eng}"}} {n}')
        return "\n".join(out) + "\n"
