"""The set-up of the SIMULATED Autellix study (bench/studies/sim/sim_autellix.py): its profile, workloads,
systems and the policy each runs, programs per point, loads and latency targets, and the rate scale (the
programs/s one engine of a profile could sustain on a workload, estimated from the profile's iteration
cost; the loads are fractions of it, and the steady-state study uses it too)."""

from __future__ import annotations

from typing import Any

PROFILE = "a100-llama3.1-8b-measured"
WORKLOADS = ("sharegpt", "bfcl", "lats", "mixed")
AUTELLIX = {"sharegpt": "plas", "bfcl": "plas", "lats": "atlas", "mixed": "atlas"}  # §4.2.1, §6.3
SYSTEMS = ("vllm", "vllm-opt", "mlfq", "autellix")
PROGRAMS = {"sharegpt": 300, "bfcl": 400, "lats": 40, "mixed": 90}  # programs per point at --scale 1
# fractions of capacity_estimate, up to past the knee of vLLM-opt's curve (single-threaded programs keep
# one call each in the engine, so their queue forms only once ~max_num_seqs programs are active at once)
LOADS = {
    "sharegpt": (0.5, 1.5, 2.25, 3.0),
    "bfcl": (0.5, 0.8, 1.1, 1.5, 2.25, 3.0),
    "lats": (0.5, 1.0, 1.5, 2.0),
    "mixed": (0.5, 1.0, 1.5, 2.0),
}
TARGETS = (1.5, 3.0, 5.0)  # x vLLM-opt's token latency at the lowest load


def policy_of(kind: str, system: str) -> tuple[str, bool]:
    """The teola policy a system runs on workload `kind`, and whether the prefix cache is on."""
    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; choose from {', '.join(SYSTEMS)}")
    return {
        "vllm": ("fcfs", False),
        "vllm-opt": ("fcfs", True),
        "mlfq": ("mlfq", True),
        "autellix": (AUTELLIX[kind], True),
    }[system]


def capacity_estimate(profile: dict[str, Any], kind: str, n: int = 300) -> float:
    """Programs/s one engine could sustain on `kind` (a scale for the rates, not a measurement): per
    iteration a full batch B decodes B tokens and prefills its share of new tokens, B = max_num_seqs or
    as many calls as the KV cache holds at the mean context; an iteration costs the profile's
    IterationCost. Over the generated programs: mean decoded tokens, new prompt tokens (user turns; for
    a tree call its parents' outputs once per step) and context per call."""
    from bench.studies.sim.program_setup import programs
    from engines.sim.cost import IterationCost

    llm = profile["engines"]["vllm"]
    cost = IterationCost(
        **{
            k: tuple(map(tuple, v)) if isinstance(v, list) else v
            for k, v in llm["cost"].items()
            if k in IterationCost.__dataclass_fields__
        }
    )
    progs = programs(kind, 0.0, n)
    calls = [c for p in progs for c in p.calls]
    decode = sum(c.output for c in calls) / n
    new, context = 0.0, 0.0
    for p in progs:
        ctx = 100.0
        steps: set[tuple[int, ...]] = set()
        for c in p.calls:
            if p.kind == "tree":
                parents = sum(p.calls[k].output for k in c.parents)
                if c.parents not in steps:  # siblings share their parents' outputs as a cached prefix
                    steps.add(c.parents)
                    new += parents
                context += 100 + parents + c.output / 2
            else:
                new += c.user
                ctx += c.user
                context += ctx + c.output / 2
                ctx += c.output
    context /= len(calls)
    new /= n
    kv = llm["num_blocks"] * llm["block_size"]
    batch = max(1, min(llm["max_num_seqs"], int(kv / context)))
    prefill = batch * new / max(1.0, decode)  # new prompt tokens per iteration at this mix
    t = cost.seconds(int(prefill), batch, int(batch * context), prefill * context)
    return batch / t / decode
