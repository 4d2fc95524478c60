"""Runtime benchmarks on the deterministic test engines (no real models):

(a) scheduler overhead: the advanced-RAG e-graph on zero-latency engines that do no work, a
    closed loop of concurrent queries on one core -> primitives per second through both tiers;
(b) batching policies under Poisson load (fifo / po / to / topology): mean and p99 query latency,
    as ratios to topology, on two workload shapes scaled down 10x from the Teola paper:
    fig4 -- embedding-heavy (48 chunks a query; embedding batch latency grows sub-linearly up to
            16, Fig. 4a), fig7 -- LLM-heavy (each query has prefills at several depths on one
            LLM; one 512-token prefill 0.05 s, two 0.08 s, Fig. 7).

Run: .venv/bin/python -m bench runtime_overhead [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import time

from bench.lib.results import machine, write_results  # noqa: E402
from bench.lib.tables import num, table  # noqa: E402
from engines.requests import PrimOp
from engines.sim.sim_engine import SimEngine  # noqa: E402
from teola import App, Engine, Node  # noqa: E402

POLICIES = ("fifo", "po", "to", "topology")


class NullEngine(SimEngine):
    """Zero latency and (almost) zero work: measures the runtime, not the engine."""

    def _one(self, op, r):
        if op == PrimOp.EMBEDDING:
            return [1.0, 0.0]
        if op == PrimOp.INGESTION:
            return None
        if op == PrimOp.SEARCHING:
            return [{"text": "t1", "score": 1.0}, {"text": "t2", "score": 0.5}]
        if op == PrimOp.RERANKING:
            return 1.0
        if op in ("decoding", "partial_decoding"):
            return {"text": "1. a\n2. b\n3. c", "items": ["a", "b", "c"], "num_output_tokens": 3}
        return {"num_prompt_tokens": 1, "num_cached_tokens": 0}

    def _decode(self, r):
        return self._one("decoding", r)


def rag_app(
    engines: dict[str, SimEngine],
    policy: str,
    chunk_size: int = 64,
    synthesis: str = "refine",
    runtime: dict | None = None,
) -> App:
    app = App("rag", config={"runtime": {"policy": policy, "max_inflight": 1, **(runtime or {})}})
    app.register_engine(
        Engine("llm", kind="vllm", max_efficient_batch=8, token_budget=1024), backend=engines["llm"]
    )
    app.register_engine(
        Engine("embedding", kind="sentence_transformers", max_efficient_batch=16),
        backend=engines["embedding"],
    )
    app.register_engine(Engine("vectordb", kind="pgvector"), backend=engines["vectordb"])
    app.register_engine(Engine("reranker", kind="reranker"), backend=engines["reranker"])
    expand = Node("query_expansion", engine="llm", anno="splittable", config={"num_queries": 3})
    index = Node(
        "indexing",
        engine="embedding",
        anno="batchable",
        config={"chunk_size": chunk_size, "chunk_overlap": 0},
    )
    ingest = Node("ingestion", engine="vectordb", anno="batchable")
    embed_q = Node("query_embedding", engine="embedding")
    search = Node("search", engine="vectordb", config={"top_k": 4})
    rerank = Node("rerank", engine="reranker", config={"top_n": 3})
    synth = Node("synthesis", engine="llm", config={"mode": synthesis, "max_tokens": 32})
    index >> ingest >> search
    expand >> embed_q >> search >> rerank >> synth
    app.update_template([expand, index, ingest, embed_q, search, rerank, synth])
    return app


def doc(n_chunks: int, chunk_words: int = 48) -> str:
    return " ".join(f"w{i}" for i in range(n_chunks * chunk_words))


# ---- (a) overhead ----------------------------------------------------------------------------------
async def overhead(n_queries: int, concurrency: int) -> dict:
    engines = {k: NullEngine(k, record=False) for k in ("llm", "embedding", "vectordb", "reranker")}
    app = rag_app(engines, "topology")
    await app.start()
    query = {"question": "what is it", "documents": [doc(4)]}
    compiled = [app.compile({**query, "question": f"q{i}"}) for i in range(n_queries)]
    rt = app.runtime
    warm = iter(compiled[: n_queries // 10])
    it = iter(compiled[n_queries // 10 :])

    async def worker(queue):
        for c in queue:
            await rt.run(c, {})

    await asyncio.gather(*(worker(warm) for _ in range(concurrency)))
    before = rt.metrics.primitives
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(it) for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    prims = rt.metrics.primitives - before
    batches = {k: round(v.mean, 2) for k, v in rt.metrics.batch_size.items()}
    await app.stop()
    return {
        "queries": n_queries,
        "concurrency": concurrency,
        "primitives": prims,
        "primitives_per_graph": len(compiled[0].egraph),
        "seconds": wall,
        "cpu_seconds": cpu,
        "primitives_per_s": prims / wall,
        "primitives_per_cpu_s": prims / cpu,
        "mean_batch_size": batches,
    }


# ---- (b) policies under Poisson load ---------------------------------------------------------------------
WORKLOADS = {
    "fig4": {
        "desc": "embedding-heavy: 48 chunks/query",
        "chunks": 48,
        "rate": 3.0,
        "embedding": {1: 0.012, 4: 0.015, 16: 0.045, 64: 0.18},
        "llm": {1: 0.01, 2: 0.016},
        "token_latency": 0.0002,
    },
    "fig7": {
        "desc": "LLM-heavy: prefills at several depths per query on one LLM",
        "chunks": 3,
        "rate": 1.5,
        "embedding": {1: 0.004, 16: 0.01},
        "llm": {1: 0.05, 2: 0.08, 8: 0.26},
        "token_latency": 0.0005,
    },
}


def sim_for(w: dict) -> dict[str, SimEngine]:
    return {
        "llm": SimEngine("llm", latency=w["llm"], token_latency=w["token_latency"], record=False),
        "embedding": SimEngine("embedding", latency=w["embedding"], record=False),
        "vectordb": SimEngine("vectordb", latency={1: 0.002, 64: 0.01}, record=False),
        "reranker": SimEngine("reranker", latency={1: 0.003, 64: 0.02}, record=False),
    }


async def poisson(workload: str, policy: str, n: int, seed: int) -> dict:
    w = WORKLOADS[workload]
    app = rag_app(sim_for(w), policy)
    await app.start()
    rng = random.Random(seed)
    queries = [
        app.compile({"question": f"question {i} about topic {i % 7}", "documents": [doc(w["chunks"])]})
        for i in range(n)
    ]
    latencies: list[float] = []

    async def one(c):
        r = await app.runtime.run(c, {})
        latencies.append(r.latency)

    tasks = []
    t0 = time.perf_counter()
    for c in queries:
        tasks.append(asyncio.ensure_future(one(c)))
        await asyncio.sleep(rng.expovariate(w["rate"]))
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t0
    batches = {k: round(v.mean, 2) for k, v in app.runtime.metrics.batch_size.items()}
    await app.stop()
    lat = sorted(latencies)
    return {
        "mean": statistics.fmean(lat),
        "p99": lat[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))],
        "queries": n,
        "seconds": wall,
        "mean_batch_size": batches,
    }


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of `python -m bench runtime_overhead`."""
    ap.add_argument("--quick", action="store_true", help="fewer queries (a smoke run)")
    ap.add_argument("--seed", type=int, default=7)


def run_cli(args: argparse.Namespace, argv: list[str], ap: argparse.ArgumentParser) -> None:
    """Runs `python -m bench runtime_overhead` (argv: the options given, for its page)."""
    n_over, n_load = (400, 16) if args.quick else (2000, 40)

    over = asyncio.run(overhead(n_over, 64))
    load: dict[str, dict[str, dict]] = {}
    for wl in WORKLOADS:
        load[wl] = {}
        for pol in POLICIES:
            load[wl][pol] = asyncio.run(poisson(wl, pol, n_load, args.seed))
        base = load[wl]["topology"]
        for pol in POLICIES:
            r = load[wl][pol]
            r["mean_ratio"] = r["mean"] / base["mean"]
            r["p99_ratio"] = r["p99"] / base["p99"]

    cmd = "python -m bench runtime_overhead" + (" --quick" if args.quick else "")
    data = {
        "command": cmd,
        "overhead": over,
        "poisson": load,
        "queries_per_point": n_load,
        "seed": args.seed,
        "workloads": {
            k: {kk: (str(vv) if isinstance(vv, dict) else vv) for kk, vv in w.items()}
            for k, w in WORKLOADS.items()
        },
    }
    write_results("runtime", data, markdown({**data, "machine": machine()}), subject="overheads")


def markdown(data: dict) -> str:
    """The page of a run: scheduler overhead, then latency under Poisson load per workload and policy."""
    over, load = data["overhead"], data["poisson"]
    lines = [
        "## Runtime (teola/runtime): scheduler overhead and batching policies",
        "",
        f"Command: `{data['command']}` (deterministic test engines from engines/sim/sim_engine.py; no "
        "models).",
        f"Machine: {data['machine']['cores']} cores shared with other jobs; one asyncio loop (one core).",
        "",
        "### (a) Scheduler overhead, zero-latency engines",
        "",
        *table(
            ["queries", "in flight", "primitives", "wall s", "primitives/s (wall)", "primitives/s (CPU)"],
            [
                [
                    over["queries"],
                    over["concurrency"],
                    over["primitives"],
                    num(over["seconds"], 2),
                    num(over["primitives_per_s"], 0, ","),
                    num(over["primitives_per_cpu_s"], 0, ","),
                ]
            ],
            "r" * 6,
        ),
        "",
        f"Advanced-RAG e-graph of {over['primitives_per_graph']} primitives per query; each primitive goes "
        "through dispatch, policy, batch, engine call, output collection and trace.",
        "",
        "### (b) Poisson load: latency relative to topology-aware batching (lower is better)",
        "",
        *table(
            ["workload", "policy", "mean s", "p99 s", "mean / topology", "p99 / topology"],
            (
                [
                    wl,
                    pol,
                    num(r["mean"], 3),
                    num(r["p99"], 3),
                    num(r["mean_ratio"], 2),
                    num(r["p99_ratio"], 2),
                ]
                for wl, rows in load.items()
                for pol, r in rows.items()
            ),
            "llrrrr",
        ),
    ]
    return "\n".join(
        lines
        + [
            "",
            *(
                f"- {wl}: {w['desc']}, Poisson arrivals at {w['rate']}/s, "
                f"{data['queries_per_point']} queries, seed {data['seed']}."
                for wl, w in WORKLOADS.items()
            ),
        ]
    )
