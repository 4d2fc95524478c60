"""SIMULATED: program-level scheduling (Autellix's PLAS / ATLAS / MLFQ against FCFS, and the
locality-aware balancer against round-robin and least-used) at Autellix's program shapes.

teola's runtime (program policies, preemption, balancers) drives simulated vLLM instances
(engines/sim/llm.py) in virtual time, on a GPU profile (default a100-llama2-7b-measured, built from
measured A100 operators; engines/profiles/): the harness of teola/sim/program_runs.py with the
runs of bench/studies/sim/sim_programs.py. Workloads (teola/sim/program_workloads.py, seed 1, Poisson
arrivals, prompts from shipped NQ-open questions):
  chat: single-threaded, ShareGPT-like: a long-tailed number of sequential calls per program
        (mean ~4, max 24); each call's prompt is the conversation so far plus a new question;
  tree: multi-threaded, LATS/MCTS-like: 2-4 expansion steps of 2-8 parallel calls each; every call
        of a step depends on all calls of the previous step.
One instance: FCFS (vLLM's order), MLFQ (program-blind), PLAS, ATLAS, preemption by recompute.
Two instances: PLAS under the locality-aware, round-robin and least-used balancers (chat).
Loads are fractions of FCFS's saturated capacity (bench.studies.sim.sim_programs.saturated_capacity).

    .venv/bin/python -m bench programs            # writes bench/results/programs/programs.{json,md}
    .venv/bin/python -m bench programs --quick    # fewer programs and rates (a smoke run)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from bench.lib.results import ROOT, write_results
from bench.lib.tables import num, table
from teola.sim.program_runs import load_texts, rates_at_target

BALANCERS = ("locality", "round_robin", "least_used")
PROFILE = "a100-llama2-7b-measured"


def recorded_lengths() -> list[int]:
    """Output tokens of the real engine's answers (bench/data/lengths-smollm2-135m.json, recorded by
    bench.record_lengths: 480 answers of SmolLM2-135M, at most 128 tokens)."""
    path = os.path.join(ROOT, "bench", "data", "lengths-smollm2-135m.json")
    with open(path, encoding="utf-8") as f:
        return [int(r["output_tokens"]) for r in json.load(f)["rows"]]


def balancer_runs(
    profile: dict[str, Any], loads: list[float], n: int, questions: list[str], filler: list[str]
) -> dict[str, Any]:
    """Chat programs on 2 instances under PLAS, routed by each balancer; loads are fractions of the
    2 instances' FCFS capacity (a burst routed by the locality balancer)."""
    from bench.studies.sim.program_setup import BUDGET
    from bench.studies.sim.sim_programs import run_once, saturated_capacity

    n_burst = max(n, 6 * BUDGET * 2)
    burst = run_once(profile, "chat", "fcfs", 0.0, n_burst, 2, "drop", questions, filler)
    cap = saturated_capacity(burst["log"], n_burst, BUDGET * 2)
    rows = []
    for load in loads:
        for name in BALANCERS:
            r = run_once(profile, "chat", "plas", load * cap, n, 2, "drop", questions, filler, balancer=name)
            rows.append(
                {
                    "load": load,
                    "rate": load * cap,
                    "balancer": name,
                    "longest_prompt": max(c["prompt"] or 0 for c in r["log"]),
                    **{
                        k: r[k]
                        for k in (
                            "mean",
                            "p95",
                            "p99",
                            "prompt_tokens",
                            "cached_tokens",
                            "programs_on_several_instances",
                            "sim_wall_s",
                        )
                    },
                }
            )
            print(
                f"[programs] 2 instances load {load} {name}: mean {r['mean']:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    return {"capacity": cap, "rows": rows}


def markdown(res: dict[str, Any]) -> str:
    out = [
        "## SIMULATED: program-level scheduling (Autellix PLAS / ATLAS / MLFQ, locality-aware balancing)",
        "",
        "**Simulated, not measured**: teola's runtime drives simulated vLLM instances in virtual time "
        f"(teola/sim) on the profile `{res['profile']}`; admission budget {res['budget']} running calls per "
        "instance; preemption by recompute; policy queues "
        f"{res['queues']} (teola.sim.program_runs.QUEUES). Before this page the study ran on a step-level "
        "simulator of its own (max batch 8, free preemption; retired since), whose numbers are not "
        "comparable. The simulator's error against real engines on this machine: "
        "[sim_fidelity_probe.md](sim_fidelity_probe.md).",
        "",
        f"Command: `{res['command']}` ({res['wall_s']:.0f} s wall). {res['programs']} programs per point, "
        "Poisson arrivals, seed 1; prompts from shipped NQ-open questions.",
        "",
    ]
    out += single_instance_lines(res) + balancer_lines(res["balancers"])
    return "\n".join(out)


def single_instance_lines(res: dict[str, Any]) -> list[str]:
    """Each workload on one instance under each policy, then throughput at equal latency on the tree one."""
    out: list[str] = []
    for kind in ("chat", "tree"):
        s = res["single"][kind]
        out += [
            f"### {kind} ({'single-threaded' if kind == 'chat' else 'multi-threaded'}), 1 instance; "
            f"load = arrival rate / FCFS's saturated capacity ({s['capacity']:.3f} programs/s)",
            "",
            *table(
                ["load", "rate (prog/s)", "policy", "mean (s)", "P95 (s)", "P99 (s)", "preemptions"],
                (
                    [
                        num(r["load"], 2),
                        num(r["rate"], 3),
                        r["policy"],
                        num(r["mean"], 2),
                        num(r["p95"], 2),
                        num(r["p99"], 2),
                        r["preemptions"],
                    ]
                    for r in s["rows"]
                ),
                "rrlrrrr",
            ),
            "",
        ]
    t = res["throughput_ratio"]
    ratio = "n/a" if t["ratio"] is None else f"{t['ratio']:.2f}x"
    out += [
        f"**Throughput at equal latency (tree workload):** with a mean-latency target of {t['target']:.2f} s "
        f"(2x FCFS's mean at the lowest load), FCFS sustains {_fmt(t['fcfs_rate'])} programs/s and ATLAS "
        f"{_fmt(t['atlas_rate'])} programs/s: ATLAS/FCFS = {ratio} (linear interpolation between swept "
        "rates; rates beyond the sweep are not extrapolated).",
        "",
    ]
    return out


def balancer_lines(b: dict[str, Any]) -> list[str]:
    """Two instances, chat, PLAS, under each balancer."""
    return [
        f"### 2 instances, chat, PLAS; load = arrival rate / FCFS's capacity on both ({b['capacity']:.3f} "
        "programs/s)",
        "",
        "The locality-aware balancer pins a call to its program's instance only above 2,048 prompt tokens "
        "(Autellix's threshold, the balancer's default); below it, it routes as least-used does.",
        "",
        *table(
            [
                "load",
                "rate (prog/s)",
                "balancer",
                "mean (s)",
                "P95 (s)",
                "P99 (s)",
                "prompt tokens",
                "from the prefix cache",
                "longest prompt",
                "programs on both instances",
            ],
            (
                [
                    num(r["load"], 2),
                    num(r["rate"], 3),
                    r["balancer"],
                    num(r["mean"], 2),
                    num(r["p95"], 2),
                    num(r["p99"], 2),
                    r["prompt_tokens"],
                    r["cached_tokens"],
                    r.get("longest_prompt", "n/a"),
                    r["programs_on_several_instances"],
                ]
                for r in b["rows"]
            ),
            "rrlrrrrrrr",
        ),
    ]


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of `python -m bench programs`."""
    ap.add_argument("--quick", action="store_true", help="fewer programs and loads (smoke run)")
    ap.add_argument("--programs", type=int, default=None, help="programs per point (default 200, --quick 40)")
    ap.add_argument("--profile", default=PROFILE, help=f"simulation profile (default {PROFILE})")
    ap.add_argument(
        "--out", default=None, help="results page name (default programs, --quick programs_quick)"
    )


def run_cli(args: argparse.Namespace, argv: list[str], ap: argparse.ArgumentParser) -> dict[str, Any]:
    """Runs `python -m bench programs` (argv: the options given, for its page)."""
    from bench.studies.sim.program_setup import BUDGET
    from bench.studies.sim.sim_programs import sweep
    from engines.sim.profile import load_profile
    from teola.sim.program_runs import QUEUES

    n = args.programs or (40 if args.quick else 200)
    loads = (0.8, 1.4) if args.quick else (0.6, 0.9, 1.2, 1.5, 1.8)
    t0 = time.perf_counter()
    profile = load_profile(args.profile)
    questions, filler, _ = load_texts()
    single = {kind: sweep(profile, kind, n, 1, "drop", questions, filler, loads) for kind in ("chat", "tree")}
    target, at = rates_at_target(single["tree"]["rows"], ("fcfs", "atlas"), "fcfs", factor=2)
    fr, ar = at["fcfs"], at["atlas"]
    bal = balancer_runs(profile, [0.8, 1.4] if args.quick else [0.8, 1.2, 1.6], n, questions, filler)
    res = {
        "command": "python -m bench programs" + "".join(f" {a}" for a in argv),
        "simulated": True,
        "profile": args.profile,
        "budget": BUDGET,
        "queues": QUEUES,
        "programs": n,
        "single": single,
        "throughput_ratio": {
            "target": target,
            "fcfs_rate": fr,
            "atlas_rate": ar,
            "ratio": None if not fr or not ar else ar / fr,
        },
        "balancers": bal,
        "wall_s": time.perf_counter() - t0,
    }
    write_results(
        args.out or ("programs_quick" if args.quick else "programs"), res, markdown(res), subject="programs"
    )
    return res
