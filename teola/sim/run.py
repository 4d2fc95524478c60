"""Run an app's real runtime on simulated engines in virtual time (`teola simulate`, and from Python).

    report = simulate(app, profile="cpu-smollm2-135m", rate=2.0, queries=200, instances={"llm": 4})
    print(report.table())

Every engine of the app becomes a simulated engine of the profile (engines/sim/profile.py), queries
arrive as a Poisson process, and the unchanged runtime (passes, graph scheduler, engine schedulers,
policies, balancers) serves them on a `VirtualEventLoop`: the latencies are simulated seconds.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engines.registry import kind_defaults
from engines.sim.profile import load_profile
from teola.api.app import App
from teola.sim.virtual_loop import run_virtual
from teola.trace.timeline import interval


@dataclass(slots=True)
class SimReport:
    """What one simulation measured (simulated seconds unless named wall)."""

    app: str
    profile: str
    provenance: str
    rate: float
    latencies: list[float]
    failed: int
    span: float  # first arrival to last completion
    utilisation: dict[str, float]  # engine instance -> busy fraction of the span
    primitives: int
    wall_s: float
    errors: list[str] = field(default_factory=list)
    # engine -> [queued s, running s] summed over the queries' primitives (`add_breakdown`)
    breakdown: dict[str, list[float]] = field(default_factory=dict)
    arrivals: str = "Poisson"  # how queries arrived ("trace <file>": teola/sim/trace_workload.py)

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.span if self.span > 0 else 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))]

    def summary(self) -> dict[str, Any]:
        lat = self.latencies
        return {
            "app": self.app,
            "profile": self.profile,
            "provenance": self.provenance,
            "rate": self.rate,
            "queries": len(lat) + self.failed,
            "failed": self.failed,
            "mean_s": statistics.fmean(lat) if lat else float("nan"),
            "p50_s": self.percentile(50),
            "p99_s": self.percentile(99),
            "throughput_qps": self.throughput,
            "span_s": self.span,
            "utilisation": self.utilisation,
            "primitives": self.primitives,
            "wall_s": self.wall_s,
            "primitives_per_wall_s": self.primitives / self.wall_s if self.wall_s > 0 else 0.0,
        }

    def mean_breakdown(self) -> dict[str, tuple[float, float]]:
        """engine -> (mean queued s, mean running s) of its primitives per finished query."""
        n = max(1, len(self.latencies))
        return {k: (q / n, r / n) for k, (q, r) in sorted(self.breakdown.items())}

    def per_engine(self) -> dict[str, tuple[float, int]]:
        """engine -> (mean busy fraction over its instances, instances)."""
        groups: dict[str, list[float]] = {}
        for key, value in self.utilisation.items():
            groups.setdefault(key.rsplit("/", 1)[0], []).append(value)
        return {k: (statistics.fmean(v), len(v)) for k, v in groups.items()}

    def table(self) -> str:
        s = self.summary()
        lines = [
            f"simulated ({self.provenance} profile {self.profile!r}): app {self.app}, "
            f"{self.arrivals} {self.rate:g} q/s, "
            f"{s['queries']} queries ({self.failed} failed)",
            f"  latency  mean {s['mean_s']:.3f} s   p50 {s['p50_s']:.3f} s   p99 {s['p99_s']:.3f} s",
            f"  throughput {s['throughput_qps']:.3f} q/s over {self.span:.1f} simulated s",
            "  utilisation "
            + "  ".join(
                f"{k} {v:.0%}" + (f" (mean of {n})" if n > 1 else "")
                for k, (v, n) in sorted(self.per_engine().items())
            ),
            f"  {self.primitives} primitives in {self.wall_s:.2f} s wall "
            f"({s['primitives_per_wall_s']:.0f} primitives/s)",
        ]
        lines += [f"  error: {e}" for e in self.errors[:5]]
        return "\n".join(lines)


def use_profile(
    app: App, profile: str | Path | dict[str, Any], instances: dict[str, int] | None = None
) -> None:
    """Make every engine of `app` (not yet started) a simulated engine of `profile`, with
    `instances` overriding how many instances an engine has."""
    if app.runtime is not None:
        raise RuntimeError(f"app {app.name!r} is running; choose simulation before its first query")
    unknown = sorted(set(instances or {}) - set(app.engines))
    if unknown:
        raise ValueError(
            f"--instances names {unknown}, which app {app.name!r} does not have "
            f"(its engines: {', '.join(sorted(app.engines))})"
        )
    data = load_profile(profile)
    missing = sorted({e.kind for e in app.engines.values()} - set(data["engines"]))
    if missing:
        raise ValueError(
            f"simulation profile {data.get('name', profile)!r} has no model for engine kind(s) "
            f"{missing} used by app {app.name!r}"
        )
    for name, spec in app.engines.items():
        spec.options["simulate"] = data
        if not spec.max_efficient_batch_given:  # this machine's setting is not the simulated engine's
            fitted = data["engines"][spec.kind].get("max_efficient_batch")
            declared = kind_defaults(spec.kind, {k: v for k, v in spec.options.items() if k != "simulate"})
            if fitted:  # the profiled machine's batch (teola profile records it)
                spec.max_efficient_batch = int(fitted)
            elif declared is not None:
                spec.max_efficient_batch = declared[1].max_efficient_batch
        if instances and name in instances:
            if not isinstance(instances[name], int) or instances[name] < 1:
                raise ValueError(f"instances of engine {name!r} must be an int >= 1, got {instances[name]!r}")
            spec.instances = instances[name]
    app.backends.clear()


def query_variants(base: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """n queries from one sample: the question numbered so every query is its own (no two share
    a prompt, as different users' questions would not)."""
    out = []
    for i in range(n):
        q = dict(base)
        if isinstance(q.get("question"), str):
            q["question"] = f"{q['question']} (user {i})"
        out.append(q)
    return out


def simulate(
    app: App,
    profile: str | Path | dict[str, Any],
    rate: float,
    queries: int | list[dict[str, Any]],
    instances: dict[str, int] | None = None,
    config: dict[str, Any] | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    on_query: Callable[[], None] | None = None,
    arrivals: list[float] | None = None,
    on_start: Callable[[App], None] | None = None,
) -> SimReport:
    """Serve `queries` (a count of variants of the app's sample, or a list) arriving at Poisson
    `rate` queries/s on `app` with simulated engines; returns the report. Runs its own virtual loop.
    `progress` gets a line every tenth of the queries; `on_query` is called as each one ends.
    `arrivals`: each query's arrival, seconds from the start, instead of Poisson ones (a trace:
    teola/sim/trace_workload.py); `on_start` is called with the app once its engines run."""
    if not rate > 0:
        raise ValueError(f"rate must be > 0 queries/s, got {rate!r}")
    use_profile(app, profile, instances)
    data = load_profile(profile)
    qs = query_variants(app.sample()[0], queries) if isinstance(queries, int) else list(queries)
    if not qs:
        raise ValueError("queries must be at least 1")
    wall = time.perf_counter()
    if arrivals is not None and len(arrivals) != len(qs):
        raise ValueError(f"arrivals: {len(arrivals)} given for {len(qs)} queries")
    report = run_virtual(_serve(app, qs, rate, config or {}, seed, progress, on_query, arrivals, on_start))
    report.profile, report.provenance = str(data.get("name", profile)), str(data["provenance"])
    report.wall_s = time.perf_counter() - wall
    return report


async def _serve(
    app: App,
    qs: list[dict[str, Any]],
    rate: float,
    config: dict[str, Any],
    seed: int,
    progress: Callable[[str], None] | None,
    on_query: Callable[[], None] | None,
    given: list[float] | None = None,
    on_start: Callable[[App], None] | None = None,
) -> SimReport:
    loop = asyncio.get_running_loop()
    await app.start()
    try:
        if on_start is not None:
            on_start(app)
        rng = random.Random(seed)
        t0 = loop.time()
        arrivals, t = [], t0
        for _ in qs:
            arrivals.append(t)
            t += rng.expovariate(rate)
        if given is not None:
            arrivals = [t0 + a for a in given]
        latencies: list[float] = []
        errors: list[str] = []
        breakdown: dict[str, list[float]] = {}

        async def one(q: dict[str, Any], at: float) -> None:
            await asyncio.sleep(max(0.0, at - loop.time()))
            try:
                result = await app.run(q, config)
                latencies.append(loop.time() - at)
                add_breakdown(breakdown, result.trace)
            except Exception as exc:  # a failed query is counted and named, the others go on
                errors.append(f"{type(exc).__name__}: {exc}")
            if on_query is not None:
                on_query()
            if progress is not None and (len(latencies) + len(errors)) % max(1, len(qs) // 10) == 0:
                progress(
                    f"{len(latencies) + len(errors)}/{len(qs)} queries done at t={loop.time() - t0:.1f} s"
                )

        await asyncio.gather(*(one(q, at) for q, at in zip(qs, arrivals)))
        span = loop.time() - t0
        busy = {
            f"{name}/{inst.index}": _busy(inst.handle) / span if span > 0 else 0.0
            for name, insts in app.runtime.instances.items()
            for inst in insts
        }
        primitives = app.runtime.metrics.primitives
    finally:
        await app.stop()
    return SimReport(
        app.name, "", "", rate, latencies, len(errors), span, busy, primitives, 0.0, errors, breakdown
    )


def add_breakdown(acc: dict[str, list[float]], trace: Sequence[Mapping[str, Any]]) -> None:
    """Add a query's queued and running seconds per engine (control primitives excluded) to `acc`."""
    for t in trace:
        iv = interval(t)
        if iv is None or not t.get("engine"):
            continue
        q, r = acc.setdefault(str(t["engine"]), [0.0, 0.0])
        acc[str(t["engine"])] = [q + iv[1] - iv[0], r + iv[2] - iv[1]]


def _busy(handle: Any) -> float:
    stats = getattr(handle, "stats", None)
    if isinstance(stats, dict) and "busy_s" in stats:
        return float(stats["busy_s"])
    return float(getattr(handle, "busy_s", 0.0))
