"""Compile + optimize time of one advanced-RAG query: cold (decomposition + all passes) and with
an optimized-graph cache hit. Usage: python -m bench compile [--repeat N]"""

from __future__ import annotations

import argparse
import statistics
import time

from apps import advanced_rag, naive_rag
from bench.lib.results import machine, write_results
from bench.lib.tables import num, table

DOC = " ".join(f"Paragraph {i}: the river Ouse flows through York and is {i} miles long." for i in range(400))


def measure(build, repeat: int) -> dict:
    app = build()
    cold, warm, chunking, cold_graph, warm_graph = [], [], [], [], []
    for i in range(repeat):
        app.cache.clear()
        q = {"question": f"How long is the river, variant {i}?", "documents": [DOC]}
        t = time.perf_counter()
        c = app.compile(q)
        cold.append(time.perf_counter() - t)
        cold_graph.append(c.seconds - c.prepare_seconds)
        assert not c.cache_hit
        t = time.perf_counter()
        c = app.compile({**q, "question": q["question"] + "!"})
        warm.append(time.perf_counter() - t)
        assert c.cache_hit
        warm_graph.append(c.seconds - c.prepare_seconds)
        chunking.append(c.prepare_seconds)
    chunk_ms = 1e3 * statistics.median(chunking)
    return {
        "primitives": len(c.egraph),
        "chunking_ms_p50": chunk_ms,
        "cold_graph_ms_p50": 1e3 * statistics.median(cold_graph),
        "warm_graph_ms_p50": 1e3 * statistics.median(warm_graph),
        "cold_ms_p50": 1e3 * statistics.median(cold),
        "warm_ms_p50": 1e3 * statistics.median(warm),
        "cold_ms_mean": 1e3 * statistics.mean(cold),
        "warm_ms_mean": 1e3 * statistics.mean(warm),
    }


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of `python -m bench compile`."""
    ap.add_argument("--repeat", type=int, default=200)


def run_cli(args: argparse.Namespace, argv: list[str], ap: argparse.ArgumentParser) -> None:
    """Runs `python -m bench compile` (argv: the options given, for its page)."""
    rows = {
        name: measure(b, args.repeat)
        for name, b in (("advanced_rag", advanced_rag.build), ("naive_rag", naive_rag.build))
    }
    data = {"repeat": args.repeat, "apps": rows}
    write_results("compile", data, markdown({**data, "machine": machine()}), subject="overheads")


def markdown(data: dict) -> str:
    """The page of a compile run (its results with bench.lib.results.machine()'s facts)."""
    m = data["machine"]
    md = [
        "## Graph compilation and optimization time",
        "",
        f"`python -m bench compile --repeat {data['repeat']}` on {m['cpu']} ({m['cores']} cores), commit "
        f"{m['commit']}.",
        "A query with one ~5,600-token document (about 27 chunks). Cold = chunking + decomposition + "
        "the four passes + depth assignment; warm = chunking + a hit in the optimized-graph cache. "
        "Chunking the document is data preparation done on every query; it is shown apart.",
        "",
    ]
    md += table(
        [
            "app",
            "e-graph primitives",
            "cold total p50 (ms)",
            "warm total p50 (ms)",
            "chunking (ms)",
            "graph work cold (ms)",
            "graph work warm (ms)",
        ],
        (
            [
                name,
                r["primitives"],
                num(r["cold_ms_p50"], 2),
                num(r["warm_ms_p50"], 2),
                num(r["chunking_ms_p50"], 2),
                num(r["cold_graph_ms_p50"], 2),
                num(r["warm_graph_ms_p50"], 3),
            ]
            for name, r in data["apps"].items()
        ),
    )
    return "\n".join(md)
