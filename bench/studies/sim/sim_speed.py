"""How fast the simulator is (issue 17's target: 10,000 advanced-RAG queries over 64 LLM instances in
under 60 s of wall time): bench.studies.sim.sim_paper's largest scale-out point alone, timed.

    python -m bench sim_speed [--queries 10000] [--instances 64]

Advanced RAG on the derived A100 Llama-2-7B profile, `--instances` LLM instances and one embedder,
reranker and vector DB per 8 of them, offered 0.8x the simulated one-instance capacity times the
instance count (the capacity run itself, 100 queries on one instance, is not in the timing).
Reports the wall and CPU seconds of the simulation, primitives executed per wall second, and the
simulated results (labelled simulated).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from bench.lib.results import write_results
from bench.lib.tables import num, table
from bench.studies.sim.sim_paper import SYSTEMS, capacity, run

PROFILE = "a100-llama2-7b"


def measure(queries: int, k: int) -> dict[str, Any]:
    one = capacity("advanced_rag", PROFILE, 100)
    inst = {"llm": k, "embedding": max(1, k // 8), "reranker": max(1, k // 8), "vectordb": max(1, k // 8)}
    load_before = os.getloadavg()[0]
    cpu0 = time.process_time()
    s = run("advanced_rag", PROFILE, 0.8 * one * k, queries, SYSTEMS["teola"], inst)
    return {
        "queries": queries,
        "llm_instances": k,
        "instances": inst,
        "offered_qps": 0.8 * one * k,
        "wall_s": s["wall_s"],
        "cpu_s": time.process_time() - cpu0,
        "primitives": s["primitives"],
        "primitives_per_wall_s": s["primitives_per_wall_s"],
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "simulated": {key: s[key] for key in ("throughput_qps", "mean_s", "p99_s", "failed")},
    }


def markdown(d: dict[str, Any], command: str) -> str:
    sim = d["simulated"]
    return (
        "\n".join(
            [
                "## Simulator speed (issue 17)",
                "",
                f"Command: `{command}`. Advanced RAG, {d['queries']:,} queries over {d['llm_instances']} "
                f"simulated LLM instances ({d['instances']}), derived profile `{PROFILE}`, offered "
                f"{d['offered_qps']:.1f} q/s. 1-minute load average {d['load_before']:.1f} before, "
                f"{d['load_after']:.1f} after.",
                "",
                *table(
                    ["queries", "LLM instances", "wall s", "CPU s", "primitives", "primitives / wall s"],
                    [
                        [
                            f"{d['queries']:,}",
                            d["llm_instances"],
                            num(d["wall_s"]),
                            num(d["cpu_s"]),
                            f"{d['primitives']:,}",
                            num(d["primitives_per_wall_s"], 0, ","),
                        ]
                    ],
                    "r" * 6,
                ),
                "",
                "Target: under 60 s of wall time. SIMULATED results of that run (not measurements): "
                f"throughput {sim['throughput_qps']:.1f} q/s, mean {sim['mean_s']:.2f} s, p99 "
                f"{sim['p99_s']:.2f} s, {sim['failed']} failed.",
            ]
        )
        + "\n"
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench sim_speed`."""
    p.add_argument("--queries", type=int, default=10_000)
    p.add_argument("--instances", type=int, default=64)


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench sim_speed` (argv: the options given, for its page)."""
    if args.queries < 1 or args.instances < 1:
        p.error("--queries and --instances must be >= 1")
    command = "python -m bench sim_speed " + " ".join(argv)
    d = measure(args.queries, args.instances)
    write_results("sim_speed", d, markdown(d, command.strip()), subject="sim")
    return 0
