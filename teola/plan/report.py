"""A planned schedule as text (what `teola plan` prints) and as JSON (the plan file `teola run-job`
executes). Every compared time is end to end, as the paper's metric: the search time (extra time)
plus the predicted inference time; the inference time is shown beside it."""

from __future__ import annotations

from typing import Any

from teola.plan.cost import Plan
from teola.plan.search import Schedule
from teola.plan.workload import Workload

LABELS = {
    "greedy": "SamuLLM greedy",
    "best-of-3": "greedy best-of-3",
    "max": "max heuristic",
    "min": "min heuristic",
}


def schedule_dict(s: Schedule) -> dict[str, Any]:
    """One schedule as JSON: predicted_s is the inference time, end_to_end_s adds the search time."""
    return {
        "method": s.method,
        "gpus": s.gpus,
        "predicted_s": round(s.completion_s, 3),
        "search_s": round(s.search_s, 4),
        "end_to_end_s": round(s.end_to_end_s, 3),
        "simulations": s.simulations,
        "notes": s.notes,
        "stages": [
            {
                "start_s": round(st.start, 3),
                "duration_s": round(st.duration, 3),
                "plans": {m: {"tp": p.tp, "dp": p.dp} for m, p in st.plans.items()},
                "load_s": {m: round(x, 3) for m, x in st.loads.items()},
                "requests_left": st.left,
                "finished": st.finished,
            }
            for st in s.stages
        ],
    }


def plans_of(stage: dict[str, Any]) -> dict[str, Plan]:
    """The {model: Plan} of one stage of a plan file."""
    return {m: Plan(int(p["tp"]), int(p["dp"])) for m, p in stage["plans"].items()}


def plan_file(
    job_name: str, wl: Workload, schedules: dict[str, Schedule], chosen: str | None = None
) -> dict[str, Any]:
    """The plan file: the chosen schedule (default: the first of `schedules`) and the others as baselines."""
    chosen = chosen or next(iter(schedules))
    return {
        "job": job_name,
        "simulated": True,
        "profiles": {m: f"{c.name} ({c.provenance})" for m, c in wl.models.items()},
        "requests": {m: len(r) for m, r in wl.requests.items()},
        **schedule_dict(schedules[chosen]),
        "baselines": {k: schedule_dict(v) for k, v in schedules.items() if k != chosen},
    }


def table(job_name: str, wl: Workload, schedules: dict[str, Schedule], chosen: str | None = None) -> str:
    """The chosen schedule's stages (default: the first of `schedules`), then every method's end-to-end
    time (search + inference) and its ratio to the chosen one's."""
    chosen = chosen or next(iter(schedules))
    s = schedules[chosen]
    profiles = sorted({f"{c.name} ({c.provenance})" for c in wl.models.values()})
    lines = [
        f"plan for job {job_name!r}: {wl.total_requests()} requests over {len(wl.models)} models on "
        f"{s.gpus} GPUs; profiles {', '.join(profiles)}",
        "SIMULATED: predicted with sampled output lengths and the profiles' cost models",
        "",
        f"{'stage':>5}  {'start s':>8}  {'dur s':>7}  models (plan, load s, requests left)  -> finishes",
    ]
    for i, st in enumerate(s.stages, 1):
        models = ", ".join(f"{m} {p} ({st.loads[m]:.1f}, {st.left[m]})" for m, p in st.plans.items())
        lines.append(
            f"{i:>5}  {st.start:>8.1f}  {st.duration:>7.1f}  {models}  -> {', '.join(st.finished) or '-'}"
        )
    lines += [
        "",
        f"{'method':<16} {'end-to-end s':>12} {'vs ' + chosen:>13} {'search s':>8} {'inference s':>11} "
        f"{'stages':>6}",
    ]
    for k, v in schedules.items():
        lines.append(
            f"{LABELS.get(k, k):<16} {v.end_to_end_s:>12.1f} "
            f"{v.end_to_end_s / max(s.end_to_end_s, 1e-9):>12.2f}x "
            f"{v.search_s:>8.2f} {v.completion_s:>11.1f} {len(v.stages):>6}"
        )
    lines.append("end-to-end = search time + predicted inference time (the paper's metric)")
    lines += [f"{chosen}: {n}" for n in s.notes]
    return "\n".join(lines)
