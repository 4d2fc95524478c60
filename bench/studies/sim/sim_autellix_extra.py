"""The points of the SIMULATED Autellix study beyond its curves (bench/studies/sim/sim_autellix.py runs
them): the KV-size sweep at the load of the largest gap, with its control rows, and each workload's
highest load with a longer trace."""

from __future__ import annotations

import argparse
from typing import Any

Job = dict[str, Any]


def kv_sweep_jobs(
    args: argparse.Namespace,
    workloads: dict[str, Any],
    caps: dict[str, float],
    n: dict[str, int],
    kv_tokens: int,
) -> tuple[str, float, list[Job]] | None:
    """The sweep's workload, its load (the largest gap's) and its points: vLLM-opt and Autellix at each KV
    scale, with teola's admission reserving KV, and the control with the engine's KV preemption exchanged;
    None when no sweep runs (--quick, no scales, or the workload has no gap load)."""
    scales = [float(x) for x in args.kv_scales.split(",") if x] if not args.quick else []
    sk = args.sweep_workload
    if not (scales and sk in workloads and "gap_load" in workloads[sk]):
        return None
    load = workloads[sk]["gap_load"]
    sweep_jobs = [
        {
            "kind": sk,
            "system": s,
            "load": load,
            "rate": load * caps[sk],
            "n": n[sk],
            "profile": args.profile,
            "kv_scale": x,
        }
        for x in scales
        for s in ("vllm-opt", "autellix")
    ]
    sweep_jobs += [
        {
            "kind": sk,
            "system": s,
            "load": load,
            "rate": load * caps[sk],
            "n": n[sk],
            "profile": args.profile,
            "kv_scale": 1.0,
            "token_budget": kv_tokens,
        }
        for s in ("vllm-opt", "autellix")
    ]
    # control: the same two with the engine's KV preemption swapped (swap for FCFS, recompute for Autellix),
    # to tell the policy's order from the cheaper preemption
    mid = scales[len(scales) // 2]
    sweep_jobs += [
        {
            "kind": sk,
            "system": s,
            "load": load,
            "rate": load * caps[sk],
            "n": n[sk],
            "profile": args.profile,
            "kv_scale": mid,
            "kv_preemption": how,
        }
        for s, how in (("vllm-opt", "swap"), ("autellix", "recompute"))
    ]
    return sk, load, sweep_jobs


def long_trace_jobs(
    args: argparse.Namespace,
    kinds: list[str],
    caps: dict[str, float],
    n: dict[str, int],
    loads: dict[str, Any],
) -> list[Job] | None:
    """vLLM-opt and Autellix at each workload's highest load with --long times the programs (does a queue
    form once more programs overlap?); None when not run (--long 1 or --quick)."""
    if not (args.long > 1 and not args.quick):
        return None
    return [
        {
            "kind": k,
            "system": s,
            "load": max(loads[k]),
            "rate": max(loads[k]) * caps[k],
            "n": n[k] * args.long,
            "profile": args.profile,
        }
        for k in kinds
        for s in ("vllm-opt", "autellix")
    ]
