"""The workloads and systems of the simulated program studies (bench/studies/sim/sim_programs.py and the
steady-state and Autellix studies that draw its programs): each workload's shape, its generator, Autellix's
Mixed, the policies compared with FCFS, FCFS without the prefix cache, and the admission budget."""

from __future__ import annotations

import dataclasses
import random

from teola.sim.program_workloads import ProgramSpec, workload

POLICIES = ("mlfq", "plas", "atlas")  # each against FCFS, the baseline (--baseline)
SHAPES = {
    "chat": {"max_calls": 24, "out_mean": 60, "out_max": 400},
    "tree": {"steps": (2, 4), "width": (2, 8), "out_mean": 25, "out_max": 120},
    # Autellix's published workload statistics (§6.1, Fig. 11), not tuned here. ShareGPT: calls per
    # program long-tailed, mean 6.66, max 80; 256 prefill (new user) and 277 decode tokens per call.
    "sharegpt": {
        "max_calls": 80,
        "calls_mean": 6.66,
        "user_mean": 256,
        "user_max": 1024,
        "out_mean": 277,
        "out_max": 1024,
    },
    # BFCL v3 (ReAct tool loops): 10.75 calls per program (max 70), 735.06 prefill and 34.14 decode
    # tokens per call; the prefill is taken as new tokens per call, as ShareGPT's 256 is
    "bfcl": {
        "max_calls": 70,
        "calls_mean": 10.75,
        "user_mean": 735,
        "user_max": 2048,
        "out_mean": 34.14,
        "out_max": 400,
    },
    # LATS (MCTS on HotpotQA): 159.7 calls per program, 72.6 decode tokens per call (its 467 prefill
    # tokens are not set: a call's prompt is the question plus its parents' outputs)
    "lats": {"steps": (8, 24), "width": (5, 15), "out_mean": 72.6, "out_max": 400},
}
GENERATOR = {"chat": "chat", "tree": "tree", "sharegpt": "chat", "bfcl": "chat", "lats": "tree"}
MIXED = ("sharegpt", "bfcl", "lats")  # Autellix's Mixed workload: programs sampled equally from these (§6.1)
KINDS = (*SHAPES, "mixed")
BUDGET = 64  # running calls admitted per instance (the engine's max efficient batch)
# Autellix's "vLLM" baseline (§6.2): FCFS with vLLM's prefix caching off, the baseline of its 4-15x
# (its "vLLM-opt", with prefix caching, is what `fcfs` runs here)
NOCACHE = "fcfs-nocache"


def programs(kind: str, rate: float, n: int, seed: int = 1) -> list[ProgramSpec]:
    """`n` programs of `kind` with Poisson arrivals at `rate` programs/s (0: all at t=0). "mixed"
    draws each program's kind uniformly from MIXED and takes that kind's next program (the same
    programs at every rate)."""
    if kind != "mixed":
        return workload(GENERATOR[kind], rate, n, seed, [1], **SHAPES[kind])
    rng = random.Random(seed)
    pools = {k: iter(workload(GENERATOR[k], 0.0, n, seed, [1], **SHAPES[k])) for k in MIXED}
    t, out = 0.0, []
    for _ in range(n):
        gap = rng.expovariate(rate if rate > 0 else 1.0)  # drawn either way, as in program_workloads.workload
        t += gap if rate > 0 else 0.0
        k = rng.choice(MIXED)
        p = next(pools[k])
        out.append(dataclasses.replace(p, pid=f"{k}-{p.pid}", arrival=t))
    return out


def shape_stats(kind: str, n: int) -> dict[str, float]:
    """What the generator draws for `n` programs of `kind` (seed 1): calls per program (mean, max),
    decode and new-user tokens per call (means), to set beside the published statistics."""
    progs = programs(kind, 0.0, n)
    calls = [c for p in progs for c in p.calls]
    return {
        "calls_mean": len(calls) / n,
        "calls_max": max(len(p.calls) for p in progs),
        "out_mean": sum(c.output for c in calls) / len(calls),
        "user_mean": sum(c.user for c in calls) / len(calls),
    }
