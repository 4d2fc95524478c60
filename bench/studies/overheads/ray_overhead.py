"""Per-primitive overhead of the Ray executor vs the in-process one: the advanced-RAG graph on
zero-latency deterministic engines (engines/sim/sim_engine.py, loaded by import path inside the
actors), so the difference is what crossing to an actor costs. Executors: local; Ray with every
result coming back to the driver (data_path "driver"); Ray with embeddings kept in the object store
between actors (data_path "refs", the default: batches from 100 KiB on); the same for every batch
(min_ref_bytes 0). Two cases: "small" (32-d vectors, 6 chunks a query) and "large" (384-d vectors,
100 chunks a query embedded 64 a batch), where the data path should matter.
Usage: python -m bench ray_overhead [--queries N] [--concurrency C] [--large-queries N]"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from bench.lib.results import machine, write_results
from bench.lib.tables import num, table
from engines.requests import PrimOp

SIM = "engines.sim.sim_engine:SimEngine"
LLM_OPS = ["prefilling", "partial_prefilling", "full_prefilling", "decoding", "partial_decoding"]
EXECUTORS = {
    "local": {},
    "ray-driver": {"executor": "ray", "ray": {"data_path": "driver"}},
    "ray-refs": {"executor": "ray", "ray": {"data_path": "refs"}},
    "ray-refs-all": {"executor": "ray", "ray": {"data_path": "refs", "min_ref_bytes": 0}},
}
# 6 chunks a query, embedded 16 a batch / 100 chunks, 64 a batch (~200 KB of vectors a batch)
CASES = {"small": {"dim": 32, "facts": 120, "batch": 16}, "large": {"dim": 384, "facts": 1120, "batch": 64}}


def build(runtime: dict, dim: int, batch: int = 16):
    from apps.advanced_rag import set_template
    from teola import App, Engine

    app = App("rag", config={"runtime": runtime})
    app.register_engine(Engine("llm", kind=SIM, ops=LLM_OPS, record=False))
    app.register_engine(
        Engine(
            "embedding",
            kind=SIM,
            ops=["embedding"],
            record=False,
            dim=dim,
            max_efficient_batch=batch,
            max_batch=max(64, batch),
        )
    )
    app.register_engine(Engine("vectordb", kind=SIM, ops=["ingestion", "searching"], record=False))
    app.register_engine(Engine("reranker", kind=SIM, ops=["reranking"], record=False))
    set_template(app, chunk_size=64, chunk_overlap=8, top_k=4, max_tokens=16)
    return app


def floats(x) -> int:
    if isinstance(x, float):
        return 1
    if isinstance(x, dict):
        return sum(floats(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return sum(floats(v) for v in x)
    return 0


async def driver_floats(app, q: dict) -> int:
    """Vector elements that cross the driver in one query: embedding results it receives plus the
    ingestion / search requests it sends (0 for the in-process executor: nothing crosses)."""
    ex = app.runtime.executor
    if not hasattr(ex, "data_path"):
        return 0
    seen: list[int] = []
    execute = ex.execute

    async def counting(inst, op, requests):
        results = await execute(inst, op, requests)
        if op == PrimOp.EMBEDDING:
            seen.append(floats(results))
        elif op in ("ingestion", "searching"):
            seen.append(floats(requests))
        return results

    ex.execute = counting
    try:
        await app.run(q)
    finally:
        ex.execute = execute
    return sum(seen)


async def timed(app, q: dict, queries: int, concurrency: int) -> dict:
    sem = asyncio.Semaphore(concurrency)
    prims = 0
    lat: list[float] = []

    async def one() -> None:
        nonlocal prims
        async with sem:
            r = await app.run(q)
            prims += len(r.trace)
            lat.append(r.latency)

    t = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(queries)))
    wall = time.perf_counter() - t
    return {
        "queries": queries,
        "concurrency": concurrency,
        "primitives": prims,
        "wall_s": wall,
        "us_per_primitive": 1e6 * wall / prims,
        "query_latency_ms_p50": 1e3 * statistics.median(lat),
    }


async def measure(runtime: dict, case: dict, runs: list[tuple[int, int]]) -> list[dict]:
    """One app (engines started once), timed at each (queries, concurrency)."""
    app = build(runtime, case["dim"], case["batch"])
    doc = " ".join(f"fact {i} about the river" for i in range(case["facts"]))
    q = {"question": "how long is the river", "documents": [doc]}
    try:
        await app.run(q)  # warm up: engines started, plans cached
        moved = await driver_floats(app, q)
        rows = []
        for queries, conc in runs:
            rows.append({**await timed(app, q, queries, conc), "driver_vector_floats_per_query": moved})
    finally:
        await app.stop()
    return rows


def markdown(data: dict) -> str:
    """The page of a run: its rows, the options it ran with and bench.lib.results.machine()'s facts."""
    m, o, rows = data["machine"], data["options"], data["rows"]
    md = [
        "## Ray executor overhead",
        "",
        f"`python -m bench ray_overhead --queries {o['queries']} --concurrency {o['concurrency']} "
        f"--large-queries {o['large_queries']}` on {m['cpu']} ({m['cores']} cores), commit {m['commit']}. "
        "Advanced-RAG graph on zero-latency deterministic engines; engines in-process (local) vs one Ray "
        "actor per engine on a local Ray cluster, with every result coming back through the driver "
        "(ray-driver) or with embeddings kept in Ray's object store and fetched by the consuming actor "
        "(ray-refs, the default: batches of 100 KiB and more; ray-refs-all: every batch, min_ref_bytes 0). "
        "Case small: 32-d vectors, 6 chunks a query, 16 a batch; large: 384-d vectors, 100 chunks a query, "
        "64 a batch. Time per primitive = wall time / primitives executed; vector floats via "
        "driver = embedding elements the driver received or sent in one query.",
        "",
    ]
    md += table(
        [
            "case",
            "executor",
            "concurrent queries",
            "primitives",
            "µs per primitive",
            "query p50 (ms)",
            "vector floats via driver / query",
        ],
        (
            [
                *key.split("/")[:2],
                r["concurrency"],
                r["primitives"],
                num(r["us_per_primitive"], 0),
                num(r["query_latency_ms_p50"]),
                r["driver_vector_floats_per_query"],
            ]
            for key, r in rows.items()
        ),
    )
    md.append("")
    for case in CASES:
        for conc in (1, o["concurrency"]):
            base = rows[f"{case}/local/c{conc}"]["us_per_primitive"]
            ratios = ", ".join(
                f"{name} {rows[f'{case}/{name}/c{conc}']['us_per_primitive'] / base:.1f}x"
                for name in EXECUTORS
                if name != "local"
            )
            md.append(f"- {case}, concurrency {conc}: time per primitive vs local: {ratios}")
    md.append(
        "\nEngine batches cost the same under every executor; the Ray cost is per batch (an actor call "
        "and object-store transfers), so it matters only for primitives far shorter than a model call. "
        "With ray-refs the vectors go from the embedding actor to the vector-store actor directly "
        "(a second return value of the embedding task, never fetched by the driver), instead of to the "
        "driver and back."
    )
    return "\n".join(md)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of `python -m bench ray_overhead`."""
    ap.add_argument("--queries", type=int, default=200, help="queries at the high concurrency (small case)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument(
        "--large-queries", type=int, default=48, help="queries at the high concurrency (large case)"
    )


def run_cli(args: argparse.Namespace, argv: list[str], ap: argparse.ArgumentParser) -> None:
    """Runs `python -m bench ray_overhead` (argv: the options given, for its page)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": os.getcwd()}})
    rows = {}
    try:
        for case, spec in CASES.items():
            n = args.queries if case == "small" else args.large_queries
            runs = [(max(1, n // 4), 1), (n, args.concurrency)]
            for name, rt in EXECUTORS.items():
                for r in asyncio.run(measure(rt, spec, runs)):
                    rows[f"{case}/{name}/c{r['concurrency']}"] = r
    finally:
        ray.shutdown()
    data = {
        "options": {k: getattr(args, k) for k in ("queries", "concurrency", "large_queries")},
        "rows": rows,
    }
    write_results("ray", data, markdown({**data, "machine": machine()}), subject="overheads")
