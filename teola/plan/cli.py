"""The planner's commands (registered by teola.cli):

teola plan JOB --gpus 8 --profile NAME [--method greedy|best-of-3] [--out plan.json] [--json] [--seed S]
teola run-job JOB --plan plan.json [--trace trace.jsonl] [--replan]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from engines.sim.profile import profile_names


class PlanCliError(Exception):
    """A usage mistake: printed by teola.cli as an error with exit code 2."""


def make_schedules(
    job_path: str,
    gpus: int,
    profile: str | None,
    seed: int | None = None,
    methods: tuple[str, ...] = ("greedy", "max", "min"),
) -> tuple[Any, Any, dict[str, Any]]:
    """(job, workload, {method: Schedule}) for a job file, in the order of `methods` (the first is
    the plan; the others are its baselines)."""
    from teola.plan.job import load_job
    from teola.plan.search import plan_stages
    from teola.plan.workload import build_workload

    job = load_job(job_path)
    if seed is not None:
        job.seed = seed
    wl = build_workload(job, profile)
    return job, wl, {m: plan_stages(wl, gpus, m) for m in methods}


def cmd_plan(args: argparse.Namespace) -> int:
    from teola.plan.report import plan_file, table

    try:
        job, wl, schedules = make_schedules(
            args.job, args.gpus, args.profile, args.seed, (args.method, "max", "min")
        )
    except ValueError as e:
        raise PlanCliError(str(e)) from None
    data = plan_file(job.name, wl, schedules)
    data["job_file"] = str(Path(args.job).resolve())
    data["profile"] = args.profile
    if args.out:
        Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(data, indent=1) if args.json else table(job.name, wl, schedules))
    if args.out and not args.json:
        print(f"\nwrote {args.out} (run it with: teola run-job {args.job} --plan {args.out})")
    return 0


def cmd_run_job(args: argparse.Namespace) -> int:
    from teola.plan.run_job import run_job

    # stdout carries the result's JSON: vLLM's own log lines (stdout by default) go to stderr. Set before
    # the engines start, since vLLM reads it when its logger is first configured.
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    try:
        plan = json.loads(Path(args.plan).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise PlanCliError(f"--plan {args.plan}: cannot read a plan file ({e})") from None
    try:
        result = run_job(
            args.job,
            plan,
            trace_path=args.trace,
            replan=args.replan,
            say=lambda m: print(f"[teola] {m}", file=sys.stderr),
        )
    except ValueError as e:
        raise PlanCliError(str(e)) from None
    print(json.dumps(result, indent=1))
    return 0


def add_commands(sub: Any) -> None:
    """Register `plan` and `run-job` on teola's sub-command parser."""
    sp = sub.add_parser(
        "plan", help="plan an offline multi-LLM job on N GPUs by sampling and simulation (SamuLLM)"
    )
    sp.add_argument("job", help="a job file (JSON or YAML; see docs/planning.md)")
    sp.add_argument("--gpus", type=int, default=8, help="devices to plan for (default 8)")
    sp.add_argument(
        "--profile", help=f"profile of models whose job entry names none ({', '.join(profile_names())})"
    )
    sp.add_argument("--out", help="write the plan file (the input of teola run-job)")
    sp.add_argument("--seed", type=int, help="output-length sampling seed (default: the job's)")
    sp.add_argument(
        "--method",
        default="greedy",
        choices=("greedy", "best-of-3"),
        help="greedy: the paper's single-pass search (default); best-of-3: the fastest of three "
        "search variants (a deviation; its search time is the three searches')",
    )
    sp.add_argument("--json", action="store_true", help="print the plan file instead of the table")
    sp.set_defaults(handler=cmd_plan)

    sp = sub.add_parser(
        "run-job",
        help="execute a planned offline job through teola's runtime (an app's or Program's "
        "job through the app itself), stage by stage",
    )
    sp.add_argument("job", help="the job file the plan was made for")
    sp.add_argument("--plan", required=True, help="a plan file written by teola plan --out")
    sp.add_argument("--trace", help="write each LLM call's output length as JSON lines (feeds the sampler)")
    sp.add_argument(
        "--replan",
        action="store_true",
        help="a deviation, off by default: search the rest of the plan again when observed output "
        "lengths diverge from the sampled (the paper only adjusts the next stage, which run-job "
        "always does)",
    )
    sp.set_defaults(handler=cmd_run_job)
