"""The set-up of the SIMULATED steady-state studies (bench/studies/sim/sim_steady.py): the load grids, the
unloaded point, the latency targets, each study's workloads, systems, baseline and latency field, the
shortest traces, and the jobs of a workload (its unloaded point, its settling time, each system's points
up the grid)."""

from __future__ import annotations

from typing import Any

from bench.studies.sim.steady_state import OVERDUE, Trace, cover

GRID = (
    0.25,
    0.5,
    1.0,
    1.25,
    1.5,
    2.0,
    3.0,
    4.0,
    6.0,
    8.0,
    12.0,
)  # S10 loads, x sim_autellix.capacity_estimate
GRID_RATES = (
    1.0,
    2.0,
    3.0,
    4.0,
    5.0,
    6.0,
    8.0,
    10.0,
    12.0,
    16.0,
    20.0,
    24.0,
    32.0,
    40.0,
    48.0,
    64.0,
    96.0,
)  # S9, req/s
UNLOADED, UNLOADED_PROGRAMS, UNLOADED_RATE = 0.02, 30, 0.2
SOLO_PROGRAMS = 1000  # programs whose own unloaded latencies set the warm-up (sim_steady_solo)
TARGETS = (2.0, 3.0, 5.0)
STUDIES = {
    "autellix": {
        "workloads": ("sharegpt", "bfcl", "lats", "mixed"),
        "systems": ("vllm-opt", "mlfq", "autellix"),
        "base": "vllm-opt",
        "key": "tok_mean",
        "out": "sim_autellix_steady",
    },
    "lamps": {
        "workloads": ("single", "infercept", "toolbench"),
        "systems": ("INFERCEPT", "SJF", "LAMPS"),
        "base": "INFERCEPT",
        "key": "mean",
        "out": "sim_lamps_steady",
    },
}
LAMPS_SYSTEMS = {"INFERCEPT": "FCFS-request+INFERCEPT", "SJF": "SJF", "LAMPS": "LAMPS"}  # sim_lamps' names
LAMPS_MIN = (300.0, 1800.0, 300.0)  # S9's shortest warm-up, window, cool-down (s)
AUTELLIX_MIN_WINDOW = 300.0  # S10's shortest window (s): BFCL's 10 x m0 is ~45 s, 10 programs at 0.25x


def unloaded_job(study: str, kind: str, profile_cap: float) -> dict[str, Any]:
    """The baseline at a light load: its mean latency sets the trace (steady_state.trace_for)."""
    base = STUDIES[study]["base"]
    if study == "lamps":
        job = {
            "study": study,
            "kind": kind,
            "system": base,
            "load": UNLOADED_RATE,
            "rate": UNLOADED_RATE,
            "trace": list(LAMPS_MIN),
        }
    else:
        rate = UNLOADED * profile_cap
        job = {
            "study": study,
            "kind": kind,
            "system": base,
            "load": UNLOADED,
            "rate": rate,
            "trace": [0.0, UNLOADED_PROGRAMS / rate, 0.0],
            "overdue": OVERDUE,
            "profile": profile_name(),
        }
    return job


def settling(kind: str, n: int = SOLO_PROGRAMS) -> dict[str, float]:
    """The own unloaded latencies of `kind`'s first `n` programs (sim_steady_solo): mean, 95th
    percentile, max, and their cover (steady_state.cover), the warm-up's floor over KNEE."""
    import bench.studies.sim.sim_autellix as sim_autellix
    from bench.studies.sim.sim_steady_solo import solo_latencies

    solos = sorted(solo_latencies(kind, n, sim_autellix._profile(sim_autellix.PROFILE)))
    return {
        "programs": n,
        "mean": sum(solos) / n,
        "p95": solos[int(0.95 * n)],
        "max": solos[-1],
        "cover": cover(solos),
    }


def profile_name() -> str:
    import bench.studies.sim.sim_autellix as sim_autellix

    return sim_autellix.PROFILE


def workload_jobs(
    study: str,
    kind: str,
    systems: list[str],
    trace: Trace,
    cap: float,
    grid: tuple[float, ...],
    floor: float = 0.0,
) -> dict[str, list[dict[str, Any]]]:
    """Each system's jobs up the grid on `trace` (S10: overdue after OVERDUE x max(own, `floor`) s)."""
    extra = (
        {} if study == "lamps" else {"overdue": OVERDUE, "overdue_floor": floor, "profile": profile_name()}
    )
    return {
        s: [
            {
                "study": study,
                "kind": kind,
                "system": s,
                "load": g,
                "rate": g * cap,
                "trace": [trace.warmup, trace.window, trace.cooldown],
                **extra,
            }
            for g in grid
        ]
        for s in systems
    }
