"""SIMULATED: Autellix's Fig. 12 (one engine) at its set-up: ShareGPT, BFCL, LATS and Mixed programs on
Llama-3.1-8B / one A100-80GB, vLLM vs vLLM-opt vs MLFQ vs Autellix, program-level token latency against
the program arrival rate.

    python -m bench sim_autellix [--scale 1.0] [--jobs 2] [--quick]

Every number here is simulated: teola's runtime (its fcfs / mlfq / plas / atlas policies, the preemptor
that aborts and resumes calls) drives a simulated vLLM (engines/sim/llm.py) in virtual time, on the
profile built from measured A100 operator timings (engines/profiles/a100-llama3.1-8b-measured.json,
docs/simulator.md). The simulator's measured error is in bench/results/sim/sim_fidelity_probe.md.

Set-up, each item from the paper (Autellix, arXiv 2502.13965):
  - workloads (§6.1, Fig. 11): ShareGPT (whole conversations as programs, calls per program long-tailed,
    mean 6.66 / max 80, 256 prefill and 277 decode tokens per call), BFCL (10.75 / 70 calls, 735 prefill,
    34.14 decode), LATS (MCTS on HotpotQA, 159.7 calls per program, 467.2 prefill, 72.6 decode), Mixed
    (programs sampled equally from the three). Only these summary statistics are published (the traces
    are not available offline), so bench.studies.sim.sim_programs' generators draw from distributions with
    those means (teola/sim/program_workloads.py; the page sets the drawn statistics beside the paper's);
  - arrivals: programs (not calls) arrive as a Poisson process (§6.1);
  - engine (§6.2): one Llama-3.1-8B on one A100-80GB, the same max batch for every system (vLLM's
    max_num_seqs 256), KV cache from 80 GB at 0.9 utilisation minus the weights;
  - systems (§6.2): vLLM = FCFS without prefix caching; vLLM-opt = FCFS with chunked prefill and prefix
    caching; MLFQ = vLLM-opt with program-blind multi-level feedback queues; Autellix = PLAS on the
    single-threaded workloads and ATLAS on LATS and Mixed (§4.2.1). Every system admits calls by the
    engine's capacity (Engine(admission="capacity"), max_num_seqs calls), the engine takes its waiting
    calls by their queue index (vLLM's priority scheduling, as teola runs vLLM; arrival order under
    FCFS) and preempts when its KV blocks run out: by recompute under FCFS (vLLM's rule), by swap under
    MLFQ and Autellix, which also preempt for better queues with the KV swapped to host memory
    (§4.2.2), charging service in seconds of model time (§4.2.1);
  - metric (§6.2): program-level token latency (a program's latency over the tokens it decoded), mean,
    against the arrival rate; throughput at equal latency read from those curves.
Rates are fractions of an estimated capacity (capacity_estimate: the decode rate of a full batch on the
profile over a program's decoded tokens, with its prefill): a scale for the x axis, not a measurement.
Each run also samples the engine over time (queue, running batch, KV occupancy, preemptions) for the
mechanism analysis, and `--kv-scales` reruns one workload at one load with less KV memory.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from bench.lib.results import percentile, results_dir, write_results
from bench.studies.sim.sim_autellix_extra import kv_sweep_jobs, long_trace_jobs
from bench.studies.sim.sim_autellix_setup import (
    LOADS,
    PROFILE,
    PROGRAMS,
    SYSTEMS,
    WORKLOADS,
    capacity_estimate,
    policy_of,
)

# what a point's row keeps of its job and of its statistics (teola.sim.program_runs.run_set)
JOB_KEYS = ("kind", "system", "load", "rate", "kv_scale", "token_budget", "kv_preemption")
ROW_KEYS = (
    "programs",
    "calls",
    "mean",
    "p50",
    "p95",
    "p99",
    "tok_mean",
    "tok_p99",
    "wall",
    "output_tokens",
    "prompt_tokens",
    "cached_tokens",
    "preemptions",
    "resumed_tokens",
    "resumed_cached_tokens",
    "resumed_swapped_tokens",
    "mechanism",
)


# ---- the workload ----------------------------------------------------------------------------------
@functools.cache
def _profile(name: str) -> dict[str, Any]:
    from engines.sim.profile import load_profile

    return load_profile(name)


@functools.cache
def _texts() -> tuple[list[str], list[str]]:
    from teola.sim.program_runs import load_texts

    questions, filler, _ = load_texts()
    return questions, filler


# ---- one run ---------------------------------------------------------------------------------------
class Probe:
    """Samples the engine every `interval` virtual seconds while programs run: calls waiting in teola's
    queue and inside the engine, the running batch, the KV blocks held, and the preemption counters."""

    def __init__(self, rt: Any, interval: float, until: float) -> None:
        sched = rt.schedulers["llm"]
        self.sched, self.metrics, self.interval, self.until = sched, rt.metrics, interval, until
        self.engine = sched.instances[0].handle
        self.samples: list[tuple[int, int, int, float]] = []

    async def run(self) -> None:
        """Sample until the last program arrived (the drain after it, where the longest programs run
        almost alone, would otherwise dominate the averages)."""
        eng = self.engine
        t0 = asyncio.get_running_loop().time()
        while asyncio.get_running_loop().time() - t0 < self.until:
            await asyncio.sleep(self.interval)
            pool = eng.pool
            held = (pool.num_blocks - pool.free) / pool.num_blocks
            self.samples.append((len(self.sched.queue), len(eng.waiting), len(eng.running), held))

    def summary(self) -> dict[str, float]:
        s = self.samples or [(0, 0, 0, 0.0)]
        queue = [x[0] + x[1] for x in s]
        return {
            "samples": len(s),
            "queue_mean": statistics.mean(queue),
            "queue_p95": percentile(queue, 95),
            "engine_waiting_mean": statistics.mean(x[1] for x in s),
            "running_mean": statistics.mean(x[2] for x in s),
            "running_max": max(x[2] for x in s),
            "kv_mean": statistics.mean(x[3] for x in s),
            "kv_full": sum(x[3] >= 0.95 for x in s) / len(s),
            "kv_preemptions": self.engine.stats["preemptions"],
            "kv_recomputed_tokens": self.engine.stats["recomputed_tokens"],
            "engine_busy_s": self.engine.stats["busy_s"],
        }


def simulated_profile(
    job: dict[str, Any], profile: dict[str, Any], policy: str, cache: bool
) -> dict[str, Any]:
    """The profile one point simulates: its vLLM entry with the engine's order, its KV preemption, the
    prefix cache and the KV cache scaled as the job asks."""
    # the engine takes waiting calls by their queue index (teola starts vLLM with
    # scheduling_policy="priority"; Autellix's own scheduler orders them by queue, Alg. 1); under FCFS every
    # priority is equal, so this is vLLM's arrival order. When KV runs out the engine preempts by recompute
    # (vLLM's rule) under FCFS, by swap under MLFQ and Autellix, which also swap the KV of the calls they
    # preempt (§4.2.2)
    preemptive = policy != "fcfs"
    llm = {
        **profile["engines"]["vllm"],
        "scheduling": "priority",
        "preemption": job.get("kv_preemption") or ("swap" if preemptive else "recompute"),
        "abort_kv": "swap",
    }
    if not cache:
        llm["enable_prefix_caching"] = False
    if job.get("kv_scale", 1.0) != 1.0:
        llm["num_blocks"] = max(64, int(llm["num_blocks"] * job["kv_scale"]))
    return {**profile, "engines": {**profile["engines"], "vllm": llm}}


def run_point(job: dict[str, Any]) -> dict[str, Any]:
    """One (workload, system, rate) point: run the programs to completion in virtual time and return the
    latency statistics (teola.sim.program_runs.run_set) with the probe's summary."""
    from bench.studies.sim.program_setup import programs
    from teola import Engine
    from teola.runtime import Runtime
    from teola.scheduling.registry import make_policy
    from teola.sim.program_runs import run_set
    from teola.sim.virtual_loop import run_virtual

    kind, system = job["kind"], job["system"]
    policy, cache = policy_of(kind, system)
    prof = simulated_profile(job, _profile(job["profile"]), policy, cache)
    llm = prof["engines"]["vllm"]
    progs = programs(kind, job["rate"], job["n"])
    questions, filler = _texts()
    horizon = progs[-1].arrival if progs else 1.0

    async def scenario() -> dict[str, Any]:
        # token_budget: teola's admission also reserves each call's prompt + output tokens of KV, as on the
        # real vLLM adapter, which declares its KV size (the simulated engine declares none)
        rt = Runtime(
            {
                "llm": Engine(
                    "llm", kind="vllm", instances=1, simulate=prof, token_budget=job.get("token_budget", 0)
                )
            }
        )
        await rt.start()
        options = {} if policy == "fcfs" else {"service": "seconds"}  # Autellix's unit: model time
        rt.schedulers["llm"].policy = make_policy(policy, **options)
        probe = Probe(rt, max(0.25, horizon / 200), horizon)
        sampler = asyncio.ensure_future(probe.run())
        try:
            r = await run_set(
                rt,
                progs,
                f"{kind}-{system}-{job['rate']:.4f}",
                questions,
                filler=filler,
                token_ratio=llm.get("token_ratio", 1.3),
            )
        finally:
            sampler.cancel()
            await rt.stop()
        r["mechanism"] = probe.summary()
        return r

    wall = time.perf_counter()
    r = run_virtual(scenario())
    out = {k: job[k] for k in JOB_KEYS if k in job}
    out.update({"policy": system, **{k: r[k] for k in ROW_KEYS}, "sim_wall_s": time.perf_counter() - wall})
    print(
        f"[sim_autellix] {kind} {system} load {job['load']} kv x{job.get('kv_scale', 1.0)}: token latency "
        f"{1000 * r['tok_mean']:.0f} ms, mean {r['mean']:.1f} s, {r['preemptions']} preemptions, "
        f"{r['mechanism']['kv_preemptions']} KV preemptions ({out['sim_wall_s']:.0f} s wall)",
        file=sys.stderr,
        flush=True,
    )
    return out


def _key(job: dict[str, Any]) -> str:
    return "|".join(
        str(job.get(k, d))
        for k, d in (
            ("profile", ""),
            ("kind", ""),
            ("system", ""),
            ("load", ""),
            ("n", ""),
            ("kv_scale", 1.0),
            ("token_budget", 0),
        )
    ) + (f"|{job['kv_preemption']}" if job.get("kv_preemption") else "")


def run_jobs(jobs: list[dict[str, Any]], workers: int, cache: str | None = None) -> list[dict[str, Any]]:
    """Run the points, `workers` processes at a time (1: in this process); results in the jobs' order.
    `cache`: a JSON-lines file of finished points, appended as each ends and read first, so an
    interrupted study resumes where it stopped."""
    import json
    from pathlib import Path

    done: dict[str, dict[str, Any]] = {}
    if cache and Path(cache).exists():
        for line in Path(cache).read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                done[row["key"]] = row["row"]
    todo = [j for j in jobs if _key(j) not in done]

    def keep(job: dict[str, Any], row: dict[str, Any]) -> None:
        done[_key(job)] = row
        if cache:
            with open(cache, "a") as f:
                f.write(json.dumps({"key": _key(job), "row": row}) + "\n")

    if workers <= 1:
        for j in todo:
            keep(j, run_point(j))
    else:
        # a fresh process per point: a finished simulation's memory is not kept for the next one
        with ProcessPoolExecutor(max_workers=workers, max_tasks_per_child=1) as pool:
            for j, row in zip(todo, pool.map(run_point, todo)):
                keep(j, row)
    return [done[_key(j)] for j in jobs]


# ---- the command -----------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench sim_autellix`."""
    p.add_argument("--profile", default=PROFILE)
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=f"from: {', '.join(WORKLOADS)}")
    p.add_argument("--systems", default=",".join(SYSTEMS), help=f"from: {', '.join(SYSTEMS)}")
    p.add_argument("--scale", type=float, default=1.0, help=f"programs per point x this ({PROGRAMS} at 1)")
    p.add_argument(
        "--loads", help=f"fractions of the estimated capacity, for every workload (default {LOADS})"
    )
    p.add_argument("--jobs", type=int, default=2, help="simulations run in parallel processes")
    p.add_argument(
        "--kv-scales",
        default="0.125,0.25,0.5",
        help="KV cache sizes (x the profile's) for the sweep; '' for none",
    )
    p.add_argument("--sweep-workload", default="sharegpt")
    p.add_argument(
        "--long",
        type=int,
        default=3,
        help="also run vLLM-opt and Autellix at each workload's highest load "
        "with this many times the programs (1: not)",
    )
    p.add_argument(
        "--quick", action="store_true", help="sharegpt only, 6 programs, 2 loads, no sweep (a smoke run)"
    )
    p.add_argument("--out", default="sim_autellix")
    p.add_argument(
        "--cache", help="JSON-lines file of finished points: appended as they end, reused on a rerun"
    )
    p.add_argument(
        "--render", action="store_true", help="re-write the page from bench/results/sim/<out>.json (no runs)"
    )


def extra_runs(
    args: argparse.Namespace,
    workloads: dict[str, Any],
    caps: dict[str, float],
    n: dict[str, int],
    loads: dict[str, Any],
    kv_tokens: int,
) -> dict[str, Any]:
    """The runs beyond the curves (bench/studies/sim/sim_autellix_extra.py): the KV-size sweep at the load
    of the largest gap ("kv_sweep") and each workload's highest load with a longer trace ("long")."""
    out: dict[str, Any] = {}
    sweep = kv_sweep_jobs(args, workloads, caps, n, kv_tokens)
    if sweep is not None:
        sk, load, jobs = sweep
        base = [
            r for r in workloads[sk]["rows"] if r["load"] == load and r["system"] in ("vllm-opt", "autellix")
        ]
        out["kv_sweep"] = {
            "kind": sk,
            "load": load,
            "rows": run_jobs(jobs, args.jobs, args.cache) + [{**r, "kv_scale": 1.0} for r in base],
        }
    longer = long_trace_jobs(args, list(workloads), caps, n, loads)
    if longer is not None:
        out["long"] = {"factor": args.long, "rows": run_jobs(longer, args.jobs, args.cache)}
    return out


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench sim_autellix` (argv: the options given, for its page)."""
    from bench.studies.sim.sim_autellix_analysis import ANALYSIS
    from bench.studies.sim.sim_autellix_report import curves, markdown

    if args.render:
        import json

        data = json.loads((results_dir("sim") / f"{args.out}.json").read_text())
        data.pop("machine", None)
        data["analysis"] = ANALYSIS
        write_results(args.out, data, markdown(data), subject="sim")
        return 0
    t0 = time.perf_counter()
    kinds = ["sharegpt"] if args.quick else args.workloads.split(",")
    systems = [s for s in SYSTEMS if s in args.systems.split(",")]
    for k in kinds:
        if k not in WORKLOADS:
            p.error(f"unknown workload {k!r}; choose from {', '.join(WORKLOADS)}")
    given = tuple(map(float, args.loads.split(","))) if args.loads else None
    loads = {k: (0.6, 1.2) if args.quick else given or LOADS[k] for k in kinds}
    n = {k: 6 if args.quick else max(2, round(PROGRAMS[k] * args.scale)) for k in kinds}
    profile = _profile(args.profile)
    caps = {k: capacity_estimate(profile, k) for k in kinds}
    jobs = [
        {"kind": k, "system": s, "load": load, "rate": load * caps[k], "n": n[k], "profile": args.profile}
        for k in kinds
        for load in loads[k]
        for s in systems
    ]
    rows = run_jobs(jobs, args.jobs, args.cache)
    workloads = curves(kinds, systems, rows, caps, n)
    llm = profile["engines"]["vllm"]
    data = {
        "profile": args.profile,
        "kv_tokens": llm["num_blocks"] * llm["block_size"],
        "max_num_seqs": llm["max_num_seqs"],
        "chunk": llm["max_num_batched_tokens"],
        "jobs": args.jobs,
        "programs": ", ".join(f"{k} {v}" for k, v in n.items()),
        "loads": loads,
        "workloads": workloads,
        "reduction": f"scale {args.scale}: the paper does not say how many programs a trace holds; these "
        "counts fit this study's time on 2 cores, and with them a point's arrival window is only a few "
        "program latencies long on LATS, so its high loads are transients, not steady states",
        "command": "python -m bench sim_autellix " + " ".join(argv),
    }
    data.update(extra_runs(args, workloads, caps, n, loads, data["kv_tokens"]))
    data["wall_s"] = time.perf_counter() - t0
    data["analysis"] = ANALYSIS
    name = f"quick/{args.out}" if args.quick else args.out  # a smoke run stays out of the index
    write_results(name, data, markdown(data), subject="sim")
    return 0
