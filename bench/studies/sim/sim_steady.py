"""SIMULATED, at steady state: Autellix's Fig. 12 set-up (S10) and LAMPS' set-up (S9) with long traces,
warm-up and cool-down excluded, loads swept upward past the baseline's knee, and throughput at equal
latency read across it.

    python -m bench sim_steady --study autellix [--workloads sharegpt,bfcl,lats,mixed]
        [--systems vllm-opt,mlfq,autellix] [--jobs 2] [--out sim_autellix_steady]
    python -m bench sim_steady --study lamps [--workloads single,infercept,toolbench]
        [--systems INFERCEPT,SJF,LAMPS] [--jobs 2] [--out sim_lamps_steady]
    python -m bench sim_steady --quick          # a smoke run: ShareGPT, two loads, short trace

Every number is simulated (teola's runtime driving the simulated vLLM in virtual time; the simulator's
measured error: bench/results/sim/sim_fidelity_probe.md). The engines, systems and workloads are those of
bench/studies/sim/sim_autellix.py (S10) and bench/studies/sim/sim_lamps_paper.py (S9, lengths as
assumed there, not scaled); the rules (trace length, measured window, steady-state test, the knee,
throughput at equal latency) are bench/studies/sim/steady_state.py's. Per workload:
  1. the baseline (vLLM-opt for S10, INFERCEPT for S9) unloaded: a light load (UNLOADED x the capacity
     estimate for S10, UNLOADED_RATE for S9) gives its mean latency m0, which sets the trace; for S10
     the warm-up is also at least KNEE x the cover of the programs' own unloaded latencies (settling),
     and a measured program unfinished OVERDUE x max(its own unloaded latency, the workload's mean own
     unloaded latency) makes a point overloaded;
  2. every system (one point per fresh process, --jobs at a time, the systems in turn) runs the fixed load
     grid (GRID x the capacity estimate; GRID_RATES req/s) upward until its own mean latency passes KNEE x the
     baseline's m0 (or it is overloaded), or the grid ends;
  3. throughput at equal latency at TARGETS x the baseline's unloaded latency (S10: token latency, S9:
     mean end-to-end), interpolated on the curves.
Finished points go to a JSON-lines cache (--cache, default /tmp/<out>.jsonl), so a stopped run resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from bench.lib.results import results_dir, write_results
from bench.studies.sim.sim_steady_lamps import lamps_point
from bench.studies.sim.sim_steady_setup import (
    AUTELLIX_MIN_WINDOW,
    GRID,
    GRID_RATES,
    LAMPS_MIN,
    STUDIES,
    TARGETS,
    settling,
    unloaded_job,
    workload_jobs,
)
from bench.studies.sim.steady_state import KNEE, Trace, equal_latency, past_knee, trace_for


def point(job: dict[str, Any]) -> dict[str, Any]:
    """One point of either study, run (S9: sim_steady_lamps, S10: sim_steady_programs)."""
    if job["study"] == "lamps":
        return lamps_point(job)
    import bench.studies.sim.sim_steady_programs as programs

    return programs.run_point(job)


def key(job: dict[str, Any]) -> str:
    return "|".join(str(job[k]) for k in ("study", "kind", "system", "load", "trace"))


def cached(path: str | None) -> dict[str, dict[str, Any]]:
    if not path or not Path(path).exists():
        return {}
    rows = (json.loads(line) for line in Path(path).read_text().splitlines() if line.strip())
    return {r["key"]: r["row"] for r in rows}


def cached_point(job: dict[str, Any], cache: str | None, only: bool = False) -> dict[str, Any] | None:
    """point(job), or its row from the cache; a new row is appended to the cache. `only`: None for a
    point the cache lacks (nothing is run)."""
    found = cached(cache).get(key(job))
    if found is not None or only:
        return found
    row = point(job)
    if cache:
        with open(cache, "a") as f:
            f.write(json.dumps({"key": key(job), "row": row}, default=str) + "\n")
    return row


def system_sweep(args: tuple[list[dict[str, Any]], float, str, str | None, bool]) -> list[dict[str, Any]]:
    """One system's points up the grid (`jobs`, in load order) until its latency (`field`) passes KNEE x
    `unloaded` (the baseline's unloaded latency in that field); with `only`, the cached points so far."""
    jobs, unloaded, field, cache, only = args
    rows = []
    for job in jobs:
        row = cached_point(job, cache, only)
        if row is None:
            break
        rows.append(row)
        if past_knee(float(row[field]), unloaded):
            break
    return rows


def interleaved_sweeps(
    work: list[tuple[list[dict[str, Any]], float, str, str | None, bool]], jobs: int
) -> list[list[dict[str, Any]]]:
    """Every system's sweep (system_sweep's rule), each point run in a fresh process (max_tasks_per_child=1:
    a point's memory goes back when it ends), `jobs` at a time, the systems taking turns point by point;
    cached points are taken at once. Only this process appends to the caches."""
    rows: list[list[dict[str, Any]]] = [[] for _ in work]
    nxt = [0] * len(work)
    turn = deque(k for k, w in enumerate(work) if w[0])
    running: dict[Future[dict[str, Any]], int] = {}

    def advance(k: int, row: dict[str, Any]) -> None:
        todo, unloaded, field = work[k][:3]
        rows[k].append(row)
        nxt[k] += 1
        if nxt[k] < len(todo) and not past_knee(float(row[field]), unloaded):
            turn.append(k)

    with ProcessPoolExecutor(max_workers=max(1, jobs), max_tasks_per_child=1) as pool:
        while turn or running:
            while turn and len(running) < max(1, jobs):
                k = turn.popleft()
                job, cache = work[k][0][nxt[k]], work[k][3]
                row = cached(cache).get(key(job))
                if row is not None:
                    advance(k, row)
                    continue
                running[pool.submit(point, job)] = k
            if running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in done:
                    k = running.pop(f)
                    row = f.result()
                    if work[k][3]:
                        with open(str(work[k][3]), "a") as out:
                            out.write(
                                json.dumps({"key": key(work[k][0][nxt[k]]), "row": row}, default=str) + "\n"
                            )
                    advance(k, row)
    return rows


def run_workload(
    study: str,
    kind: str,
    systems: list[str],
    jobs: int,
    cache: str | None,
    grid: tuple[float, ...] | None = None,
    trace: Trace | None = None,
    only: bool = False,
) -> dict[str, Any] | None:
    """Steps 1-3 of the module docstring for one workload (`only`: from the cache's points alone; None
    when it lacks the unloaded point)."""
    spec = STUDIES[study]
    field = spec["key"]
    if study == "lamps":
        cap = 1.0
        grid = grid or GRID_RATES
    else:
        import bench.studies.sim.sim_autellix as sim_autellix

        cap = sim_autellix.capacity_estimate(sim_autellix._profile(sim_autellix.PROFILE), kind)
        grid = grid or GRID
    un = cached_point(unloaded_job(study, kind, cap), cache, only)
    if un is None:
        return None
    m0 = float(un["mean"])
    settle = None
    if study == "lamps":
        trace = trace or trace_for(
            m0, min_warmup=LAMPS_MIN[0], min_window=LAMPS_MIN[1], min_cooldown=LAMPS_MIN[2]
        )
    else:
        settle = settling(kind)
        trace = trace or trace_for(m0, min_window=AUTELLIX_MIN_WINDOW, settle=KNEE * settle["cover"])
    per_system = workload_jobs(study, kind, systems, trace, cap, grid, settle["mean"] if settle else 0.0)
    work = [(per_system[s], float(un[field]), field, cache, only) for s in systems]
    results = [system_sweep(w) for w in work] if only else interleaved_sweeps(work, jobs)
    rows = [r for rs in results for r in rs]
    curves = {s: [(r["rate"], float(r[field])) for r in rows if r["system"] == s] for s in systems}
    reading = {
        str(f): {"target": f * float(un[field]), **equal_latency(curves, spec["base"], f * float(un[field]))}
        for f in TARGETS
    }
    return {
        "capacity": cap,
        "unloaded": un,
        "trace": [trace.warmup, trace.window, trace.cooldown],
        "settle": settle,
        "rows": rows,
        "equal_latency": reading,
        "knee": KNEE,
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench sim_steady`."""
    p.add_argument(
        "--study",
        choices=tuple(STUDIES),
        default="autellix",
        help="autellix: Autellix's Fig. 12 set-up (S10); lamps: LAMPS' set-up (S9)",
    )
    p.add_argument("--workloads", help="comma-separated (default: every workload of the study)")
    p.add_argument("--systems", help="comma-separated (default: the study's baseline and its rivals)")
    p.add_argument("--jobs", type=int, default=2, help="points run in parallel processes (default 2)")
    p.add_argument("--cache", help="JSON-lines file of finished points (default /tmp/<out>.jsonl)")
    p.add_argument(
        "--quick", action="store_true", help="ShareGPT, vLLM-opt and Autellix, two loads, a short trace"
    )
    p.add_argument(
        "--loads",
        type=loads_of,
        help="comma-separated loads to run instead of the whole grid (S10: x the capacity estimate, "
        "e.g. 1.0,1.25; S9: req/s): one point per system and load, the rest of the rules unchanged",
    )
    p.add_argument("--render", action="store_true", help="rewrite the page from bench/results/sim/<out>.json")
    p.add_argument(
        "--cached-only",
        action="store_true",
        help="write the page from the points in --cache alone, running nothing (a sweep still running)",
    )
    p.add_argument("--out", help="result name (default sim_autellix_steady / sim_lamps_steady)")


def loads_of(text: str) -> tuple[float, ...]:
    """--loads: "1.0,1.25" -> (1.0, 1.25), in increasing order (a sweep climbs)."""
    try:
        loads = tuple(sorted({float(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--loads takes comma-separated numbers, got {text!r}") from None
    if not loads or min(loads) <= 0:
        raise argparse.ArgumentTypeError(f"--loads takes positive loads, got {text!r}")
    return loads


def check_choices(study: str, kinds: list[str], systems: list[str], p: argparse.ArgumentParser) -> None:
    """A parser error for a workload or system `study` does not have, or systems without its baseline."""
    spec = STUDIES[study]
    for k in kinds:
        if k not in spec["workloads"]:
            p.error(f"unknown workload {k!r} for --study {study}; choose from {', '.join(spec['workloads'])}")
    for s in systems:
        if s not in spec["systems"] and not (study == "autellix" and s == "vllm"):
            p.error(f"unknown system {s!r} for --study {study}; choose from {', '.join(spec['systems'])}")
    if spec["base"] not in systems:
        p.error(f"--systems must include the baseline {spec['base']}")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench sim_steady`."""
    from bench.studies.sim.sim_steady_report import markdown

    spec = STUDIES[args.study]
    out = args.out or spec["out"]
    if args.render:
        data = json.loads((results_dir("sim") / f"{out}.json").read_text())
        data.pop("machine", None)
        write_results(out, data, markdown(data), subject="sim")
        return 0
    kinds = (
        ["sharegpt"]
        if args.quick
        else (args.workloads.split(",") if args.workloads else list(spec["workloads"]))
    )
    systems = (
        ["vllm-opt", "autellix"]
        if args.quick
        else (args.systems.split(",") if args.systems else list(spec["systems"]))
    )
    check_choices(args.study, kinds, systems, p)
    cache = args.cache or f"/tmp/{'quick_' if args.quick else ''}{out}.jsonl"
    t0 = time.perf_counter()
    data: dict[str, Any] = {
        "study": args.study,
        "systems": systems,
        "base": spec["base"],
        "key": spec["key"],
        "targets": list(TARGETS),
        "knee": KNEE,
        "workloads": {},
        "quick": args.quick,
        "cached_only": args.cached_only,
        "command": f"python -m bench sim_steady {shlex.join(argv)}".strip(),
        "nice": os.nice(0),
    }
    for k in kinds:
        quick: dict[str, Any] = {"grid": (0.5, 1.5), "trace": Trace(60.0, 240.0, 30.0)} if args.quick else {}
        if args.loads:
            quick["grid"] = args.loads
        w = run_workload(args.study, k, systems, args.jobs, cache, only=args.cached_only, **quick)
        if w is None:
            continue
        data["workloads"][k] = w
        data["wall_s"] = time.perf_counter() - t0
        name = f"quick/{out}" if args.quick else out
        # after each workload: a stopped run keeps what finished
        write_results(name, data, markdown(data), subject="sim")
    return 0


if __name__ == "__main__":
    raise SystemExit("run: python -m bench sim_steady (docs/benchmarks.md)")
