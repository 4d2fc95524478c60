"""A planned schedule as text (what `teola plan` prints) and as JSON (the plan file `teola run-job`
executes)."""
from __future__ import annotations

from typing import Any

from teola.plan.cost import Plan
from teola.plan.search import Schedule
from teola.plan.workload import Workload

LABELS = {"greedy": "SamuLLM greedy", "max": "max heuristic", "min": "min heuristic"}


def schedule_dict(s: Schedule) -> dict[str, Any]:
    return {"method": s.method, "gpus": s.gpus, "predicted_s": round(s.completion_s, 3),
            "search_s": round(s.search_s, 4), "simulations": s.simulations, "notes": s.notes,
            "stages": [{"start_s": round(st.start, 3), "duration_s": round(st.duration, 3),
                        "plans": {m: {"tp": p.tp, "dp": p.dp} for m, p in st.plans.items()},
                        "load_s": {m: round(x, 3) for m, x in st.loads.items()},
                        "requests_left": st.left, "finished": st.finished} for st in s.stages]}


def plans_of(stage: dict[str, Any]) -> dict[str, Plan]:
    """The {model: Plan} of one stage of a plan file."""
    return {m: Plan(int(p["tp"]), int(p["dp"])) for m, p in stage["plans"].items()}


def plan_file(job_name: str, wl: Workload, schedules: dict[str, Schedule]) -> dict[str, Any]:
    chosen = schedules["greedy"]
    return {"job": job_name, "simulated": True,
            "profiles": {m: f"{c.name} ({c.provenance})" for m, c in wl.models.items()},
            "requests": {m: len(r) for m, r in wl.requests.items()},
            **schedule_dict(chosen),
            "baselines": {k: schedule_dict(v) for k, v in schedules.items() if k != "greedy"}}


def table(job_name: str, wl: Workload, schedules: dict[str, Schedule]) -> str:
    s = schedules["greedy"]
    profiles = sorted({f"{c.name} ({c.provenance})" for c in wl.models.values()})
    lines = [f"plan for job {job_name!r}: {wl.total_requests()} requests over {len(wl.models)} models on "
             f"{s.gpus} GPUs; profiles {', '.join(profiles)}",
             "SIMULATED: predicted with sampled output lengths and the profiles' cost models", "",
             f"{'stage':>5}  {'start s':>8}  {'dur s':>7}  models (plan, load s, requests left)  -> finishes"]
    for i, st in enumerate(s.stages, 1):
        models = ", ".join(f"{m} {p} ({st.loads[m]:.1f}, {st.left[m]})" for m, p in st.plans.items())
        lines.append(f"{i:>5}  {st.start:>8.1f}  {st.duration:>7.1f}  {models}  -> {', '.join(st.finished) or '-'}")
    lines += ["", f"{'method':<16} {'completion s':>12} {'vs greedy':>9} {'stages':>6} {'search s':>8}"]
    for k, v in schedules.items():
        lines.append(f"{LABELS[k]:<16} {v.completion_s:>12.1f} {v.completion_s / max(s.completion_s, 1e-9):>8.2f}x "
                     f"{len(v.stages):>6} {v.search_s:>8.2f}")
    lines += [f"greedy: {n}" for n in s.notes]
    return "\n".join(lines)
