"""SIMULATED: Autellix Fig. 11-style program latency vs arrival rate on a derived GPU profile.

    python -m bench sim_programs [--profile a100-llama2-7b-measured] [--programs 150] [--quick]
                                 [--nocache-baseline]

Every number here is simulated: teola's runtime (program policies, the preemptor that aborts and
resumes calls, balancers) drives simulated vLLM instances (engines/sim/llm.py) in virtual time; the
profile is derived from published figures (engines/profiles/<profile>.json), not measured. The
simulator's measured error on this machine is in bench/results/sim/sim_fidelity_probe.md.

Workloads at Autellix's shapes (teola/sim/program_workloads.py generators, Poisson arrivals, seed 1): chat
(single-threaded, long-tailed calls per program, output mean 60 / max 400 tokens; a call keeps the
last 9,000 characters of its conversation, so it fits Llama-2's 4,096-token context) and tree
(multi-threaded, 2-4 steps of 2-8 parallel calls, output mean 25 / max 120), prompts from shipped
NQ-open questions. More kinds take Autellix's published statistics (§6.1) instead: sharegpt
(calls per program lognormal, mean 6.66, max 80; 256 new user tokens padded from shipped Wikipedia
text and 277 decode tokens per call, both exponential) and lats (8-24 steps of 5-15 parallel calls,
~160 calls, 72.6 decode tokens), with bfcl (lognormal calls, mean 10.75, max 70; 735 new tokens and
34.1 decode tokens per call) and mixed (each program drawn equally from sharegpt, bfcl and lats, as
Autellix's Mixed); on a profile with at least 32k context (a100-llama3.1-8b,
Autellix's model and GPU) conversations are kept whole. Policies FCFS / MLFQ / PLAS / ATLAS (FCFS: policy
`fcfs`, vLLM's order with each call returning when it ends; `--baseline fifo` runs teola's batching strawman
instead, as the pages before commit 82110ed did); teola's preemption either recomputes a
resumed call (abort, re-prefill mostly from the prefix cache), swaps its KV out and back in
(`abort_kv="swap"` at the profile's PCIe swap cost), or swaps only when a round trip is cheaper
than recomputing what the prefix cache will have lost (`abort_kv="auto"`, mode "auto"); 1 instance, and 4
instances with the locality-aware balancer. Rates are fractions of the FCFS capacity: the decoded tokens per
second a burst of 6 x the admission budget x instances programs at t=0 sustained while the budget was full,
over a program's mean decoded tokens (saturated_capacity; pages before it used programs / makespan).
Latency is reported as program latency and as Autellix's program-level token latency (a program's
latency over the tokens it decoded, its §6.2 metric); throughput at equal latency is given for both.
`--nocache-baseline` adds Autellix's "vLLM" baseline, FCFS with the prefix cache off (`fcfs-nocache`).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bench.lib.results import write_results
from bench.studies.sim.program_setup import BUDGET, KINDS, NOCACHE, POLICIES, programs, shape_stats
from bench.studies.sim.sim_programs_page import markdown
from teola.sim.program_runs import BASELINES, load_texts, policy_options, rates_at_target, run_set

WINDOW = 9000  # characters of conversation a chat call keeps (~2,500 tokens: fits Llama-2's 4,096)
LONG_CONTEXT = 32768  # a profile with at least this context keeps whole conversations (no window)
LOADS = (0.5, 0.8, 1.0, 1.2, 1.5)
MODES = {"drop": "recompute", "swap": "swap", "auto": "swap when worth it (auto)"}
# what a sweep keeps of each point's statistics (teola.sim.program_runs.run_set)
ROW_KEYS = (
    "mean",
    "p50",
    "p95",
    "p99",
    "tok_mean",
    "tok_p99",
    "preemptions",
    "resumed_tokens",
    "resumed_cached_tokens",
    "sim_wall_s",
    "calls",
    "prompt_tokens",
    "cached_tokens",
    "output_tokens",
)


def run_settings(profile: dict[str, Any], policy: str, abort_kv: str) -> tuple[str, dict[str, Any]]:
    """The policy teola runs and the profile its engines simulate: `abort_kv` as the preemption mode, and
    for NOCACHE (Autellix's "vLLM") FCFS with the prefix cache off."""
    cache = {"enable_prefix_caching": False} if policy == NOCACHE else {}
    prof = {
        **profile,
        "engines": {
            **profile["engines"],
            "vllm": {**profile["engines"]["vllm"], "abort_kv": abort_kv, **cache},
        },
    }
    return ("fcfs" if policy == NOCACHE else policy), prof


def run_once(
    profile: dict[str, Any],
    kind: str,
    policy: str,
    rate: float,
    n: int,
    instances: int,
    abort_kv: str,
    questions: list[str],
    filler: list[str],
    seed: int = 1,
    promotion: str = "preempt",
    balancer: str = "locality",
) -> dict[str, Any]:
    """`n` programs of `kind` at `rate` under `policy` on `instances` simulated vLLM instances of
    `profile` (routed by `balancer` when more than one), run to completion in virtual time:
    teola.sim.program_runs.run_set's statistics with every call's record ("log")."""
    from teola import Engine
    from teola.runtime import Runtime
    from teola.sim.virtual_loop import run_virtual

    policy, prof = run_settings(profile, policy, abort_kv)
    progs = programs(kind, rate, n, seed)
    llm = profile["engines"]["vllm"]
    ratio = llm.get("token_ratio", 1.3)
    window = None if llm.get("max_model_len", 0) >= LONG_CONTEXT else WINDOW
    routing = {"balancer": balancer} if instances > 1 else {}

    async def scenario() -> dict[str, Any]:
        spec = Engine(
            "llm",
            kind="vllm",
            instances=instances,
            max_efficient_batch=BUDGET,
            admission="efficient_batch",
            simulate=prof,
            **routing,
        )
        rt = Runtime(
            {"llm": spec}, policy=policy, policy_options={policy: policy_options(policy, promotion=promotion)}
        )
        await rt.start()
        try:
            return await run_set(
                rt,
                progs,
                f"{kind}-{policy}-{rate:.3f}",
                questions,
                window=window,
                filler=filler,
                token_ratio=ratio,
                keep_log=True,
            )
        finally:
            await rt.stop()

    wall = time.perf_counter()
    out = run_virtual(scenario())
    out["sim_wall_s"] = time.perf_counter() - wall
    return out


def saturated_capacity(log: list[dict[str, Any]], n: int, budget: int) -> float:
    """Programs/s a burst of `n` programs sustained while the engines were full: decoded tokens per
    second up to the moment fewer than `budget` programs were left, over the mean decoded tokens of
    a program. (Programs / makespan undercounts it: a burst ends with its longest program's calls
    running one after another on an almost empty engine.)"""
    ends: dict[str, float] = {}
    for c in log:
        ends[c["program"]] = max(ends.get(c["program"], 0.0), c["end"])
    done = sorted(ends.values())
    per_program = sum(c["output"] or 0 for c in log) / n
    if n <= budget or per_program <= 0:
        return n / done[-1]
    t_sat = done[n - budget]
    return sum(c["output"] or 0 for c in log if c["end"] <= t_sat) / t_sat / per_program


def sweep(
    profile: dict[str, Any],
    kind: str,
    n: int,
    instances: int,
    abort_kv: str,
    questions: list[str],
    filler: list[str],
    loads: tuple[float, ...],
    baseline: str = "fcfs",
    nocache: bool = False,
    promotion: str = "preempt",
) -> dict[str, Any]:
    n_burst = max(n, 6 * BUDGET * instances)
    burst = run_once(profile, kind, baseline, 0.0, n_burst, instances, abort_kv, questions, filler)
    cap = saturated_capacity(burst["log"], n_burst, BUDGET * instances)
    rows = []
    bases = (baseline, NOCACHE) if nocache else (baseline,)
    for load in loads:
        for policy in (*bases, *POLICIES):
            r = run_once(
                profile,
                kind,
                policy,
                load * cap,
                n,
                instances,
                abort_kv,
                questions,
                filler,
                promotion=promotion,
            )
            rows.append({"load": load, "rate": load * cap, "policy": policy, **{k: r[k] for k in ROW_KEYS}})
            print(
                f"[sim_programs] {kind} x{instances} {abort_kv} load {load} {policy}: mean {r['mean']:.1f} "
                f"s, {r['preemptions']} preemptions ({r['sim_wall_s']:.0f} s wall)",
                file=sys.stderr,
                flush=True,
            )
    target, tput = rates_at_target(rows, (baseline, *POLICIES), baseline)
    return {"capacity": cap, "rows": rows, "target_s": target, "rate_at_target": tput, "baseline": baseline}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench sim_programs`."""
    p.add_argument(
        "--profile",
        default="a100-llama2-7b-measured",
        help="simulation profile (default: built from measured A100 operators, "
        "bench/results/sim/gpu_profiles.md)",
    )
    p.add_argument("--programs", type=int, default=300)
    p.add_argument(
        "--quick", action="store_true", help="chat only, 1 instance, recompute, 30 programs, 2 loads"
    )
    p.add_argument("--instances", default="1,4", help="instance counts to sweep (default 1,4)")
    p.add_argument(
        "--loads",
        help=f"fractions of the FCFS capacity to sweep (default {','.join(map(str, LOADS))}); "
        "extend them until every policy's mean passes the latency target, or its rate is a lower bound",
    )
    p.add_argument(
        "--kinds",
        default="chat,tree",
        help=f"workload shapes, from: {', '.join(KINDS)} (sharegpt, bfcl and "
        "lats take Autellix's published per-workload statistics; mixed samples those three equally)",
    )
    p.add_argument(
        "--modes",
        default="drop,swap",
        help="preemption modes: drop (recompute), swap, auto (swap "
        "when worth it, counting the prefix cache's survival: engines/kv_swap_choice.save_pays)",
    )
    p.add_argument(
        "--baseline",
        choices=BASELINES,
        default="fcfs",
        help="FCFS as vLLM runs it (fcfs, default) or teola's fifo batching strawman (the pages before "
        "82110ed)",
    )
    p.add_argument(
        "--nocache-baseline",
        action="store_true",
        help=f"also run {NOCACHE}: FCFS with the prefix cache off, Autellix's 'vLLM' baseline",
    )
    p.add_argument(
        "--promotion",
        choices=("preempt", "admit"),
        default="preempt",
        help="anti-starvation promotion of MLFQ / PLAS / ATLAS: preempt (Autellix's Algorithm 1, default) "
        "or admit (a promoted call preempts only from the queue it was promoted from)",
    )
    p.add_argument("--out", default="sim_programs")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench sim_programs` (argv: the options given, for its page)."""
    from engines.sim.profile import load_profile

    profile = load_profile(args.profile)
    questions, filler, _ = load_texts()
    t0 = time.perf_counter()
    n = 30 if args.quick else args.programs
    combos = (
        [("chat", 1, "drop")]
        if args.quick
        else [
            (k, i, m)
            for k in args.kinds.split(",")
            for i in map(int, args.instances.split(","))
            for m in args.modes.split(",")
        ]
    )
    for kind in {k for k, _, _ in combos} - set(KINDS):
        p.error(f"unknown workload kind {kind!r}; choose from {', '.join(KINDS)}")
    for mode in {m for _, _, m in combos} - set(MODES):
        p.error(f"unknown preemption mode {mode!r}; choose from {', '.join(MODES)}")
    loads = (0.8, 1.2) if args.quick else tuple(map(float, args.loads.split(","))) if args.loads else LOADS
    sweeps = {}
    for kind, inst, mode in combos:
        sweeps[f"{kind}|{inst}|{MODES[mode]}"] = sweep(
            profile,
            kind,
            n * inst,
            inst,
            mode,
            questions,
            filler,
            loads,
            args.baseline,
            args.nocache_baseline,
            args.promotion,
        )
    shapes = {k: shape_stats(k, n) for k in dict.fromkeys(k for k, _, _ in combos)}
    data = {
        "profile": args.profile,
        "programs": n,
        "promotion": args.promotion,
        "sweeps": sweeps,
        "shapes": shapes,
        "capacity": "saturated",
        "loads": loads,
        "out": args.out,
        "wall_s": time.perf_counter() - t0,
        "command": "python -m bench sim_programs " + " ".join(argv),
    }
    write_results(args.out, data, markdown(data), subject="sim")
    return 0
