"""One point of the SIMULATED steady-state LAMPS study (S9; bench/studies/sim/sim_steady.py runs it):
sim_lamps.run_point at sim_lamps_paper's set-up, measured at steady state."""

from __future__ import annotations

import math
import sys
from typing import Any

from bench.studies.sim.sim_steady_setup import LAMPS_SYSTEMS


def lamps_point(job: dict[str, Any]) -> dict[str, Any]:
    """One S9 point: sim_lamps.run_point at sim_lamps_paper's set-up, measured at steady state (no drain:
    every measured request runs to its end, or the point stops as overloaded)."""
    import bench.studies.sim.sim_lamps as sim_lamps
    import bench.studies.sim.sim_lamps_paper as paper

    setup = {**paper.setup_for(paper.PROFILE), "drain": None}
    r = sim_lamps.run_point(
        paper.PROFILE, job["kind"], LAMPS_SYSTEMS[job["system"]], job["rate"], *job["trace"], setup=setup
    )
    ld = r["load"]
    over = ld.get("overloaded_at") is not None or not r["measured"]
    out = {k: job[k] for k in ("kind", "system", "load", "rate")}
    out.update(
        {
            "measured": r["measured"],
            "unfinished": r["unfinished"],
            "mean": math.inf if over else r["mean_s"],
            "ci_s": r["ci_s"],
            "p99_s": r["p99_s"],
            "steady": r["steady"],
            "api_s": r["api_s"],
            "queue_s": r["queue_s"],
            "engine_s": r["engine_s"],
            "handlings": r["handlings"],
            "preemptions": r["preemptions"],
            "sim_wall_s": r["wall_s"],
            "mechanism": {
                k: ld[k]
                for k in (
                    "waiting",
                    "waiting_first",
                    "waiting_last",
                    "running",
                    "kv_used",
                    "preserved",
                    "engine_waiting",
                    "busy",
                    "overloaded_at",
                )
                if k in ld
            },
        }
    )
    print(
        f"[sim_steady] {job['kind']} {job['system']} {job['rate']:g}/s: mean {out['mean']:.1f} s, "
        f"{out['measured']} measured, steady {out['steady']} ({out['sim_wall_s']:.0f} s wall)",
        file=sys.stderr,
        flush=True,
    )
    return out
