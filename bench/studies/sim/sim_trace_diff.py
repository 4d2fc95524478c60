"""Where the simulator's time differs from the real engines', primitive by primitive (issue 17).

    python -m bench sim_trace_diff --profile fresh|cpu-smollm2-135m [--n 3] [--system LlamaDist-PO]
                                   [--rate 0.15] [--calibrate-tokens]

The same queries (bench.studies.rag.rag's TruthfulQA-over-BoolQ set, seed 0) run one at a time, prefix cache
emptied before each, with teola's config (or --system: a bench.studies.rag.rag baseline's): first on the real
engines (recording the LLM's output lengths), then on the profile's simulated engines in virtual time with
exactly those lengths. Per app and primitive: mean time queued and running, measured vs simulated; per query:
time before the first primitive is queued (compilation, planning) and after the last finishes (result
assembly), which the simulator does not charge. With --replay each simulated LLM call decodes exactly as many
tokens as the same call on the real engines (its query's calls in start order), so the comparison
is of the cost models, not of sampled output lengths. With --rate the queries arrive as a Poisson
trace (seed 0) on both sides, so concurrent queries share the engines as in bench.studies.sim.sim_fidelity;
--calibrate-tokens scales the profile's prompt-token estimate to these queries' real prompts. `--profile
fresh` measures the profile on the started engines just before the real queries (as
bench.studies.sim.sim_fidelity does; <out>_profile.json).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench.lib.results import write_results
from bench.lib.workloads import app_query, doc_qa_queries, poisson_arrivals
from bench.studies.rag.rag_setup import SYSTEMS, make_apps, reset_prefix_cache
from bench.studies.sim.replay_lengths import (
    call_lengths,
    on_simulated_apps,
    prompt_tokens,
    scale_tokens,
    use_replay,
)
from bench.studies.sim.sim_fidelity import fresh_profile
from bench.studies.sim.sim_trace_diff_page import NAMES, markdown
from bench.studies.sim.step_timing import busy_intervals, step_rows, summary
from engines.requests import PrimOp
from teola.sim.profiler import add_lengths


async def run_queries(
    apps: dict[str, Any],
    queries: list[dict[str, Any]],
    real: bool,
    replay: dict[str, Any] | None = None,
    system: str = "teola",
    arrivals: list[float] | None = None,
    steps: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Per app, each query's latency and trace: one at a time with the prefix cache emptied before
    each, or (arrivals: seconds from the start) as an open-loop trace from one emptied cache.
    steps: filled with each app's LLM engine steps during its trace, seconds from the trace's start
    (real engines started with step_stats)."""
    config, policy = SYSTEMS[system]
    out: dict[str, Any] = {}
    for name, app in apps.items():
        app.runtime.set_policy(policy)

        async def reset() -> None:
            if real:
                await reset_prefix_cache(app)
            else:
                for inst in app.runtime.instances["llm"]:
                    inst.handle.reset_prefix_cache()

        async def one(q: dict[str, Any]) -> dict[str, Any]:
            r = await app.run(app_query(q), {**config, "policy": policy, "timeout": 600})
            return {"latency": r.latency, "trace": r.trace}

        if replay is not None:
            use_replay(
                app, {q["question"]: call_lengths(replay[name][i]["trace"]) for i, q in enumerate(queries)}
            )
        if arrivals is None:
            rows = out[name] = []
            for q in queries:
                await reset()
                rows.append(await one(q))
            continue
        await reset()
        log = _step_log(app) if steps is not None else None
        logged = len(log) if log is not None else 0
        loop = asyncio.get_running_loop()
        start, wall = loop.time(), time.time()

        async def at(i: int) -> dict[str, Any]:
            await asyncio.sleep(max(0.0, start + arrivals[i] - loop.time()))
            return await one(queries[i])

        out[name] = list(await asyncio.gather(*(at(i) for i in range(len(queries)))))
        if log is not None:
            steps[name] = [(t - wall, g, p, r) for t, g, p, r in list(log)[logged:]]
    return out


def _step_log(app: Any) -> Any:
    """The engine-step log of the app's (first) LLM, or None when it keeps none."""
    handle = app.runtime.instances["llm"][0].handle
    counter = getattr(getattr(handle, "backend", handle), "steps", None)
    return getattr(counter, "log", None)


async def real_side(
    queries: list[dict[str, Any]],
    fresh_out: str | None = None,
    system: str = "teola",
    arrivals: list[float] | None = None,
    steps: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], Any]:
    """The real runs, and (fresh_out: a results name) a profile measured first on the started engines.
    With arrivals the LLM logs its engine steps, which go into `steps` by app."""
    apps = make_apps(NAMES, {"llm": {"step_stats": True}} if arrivals else None)
    for app in apps.values():
        await app.start()
    try:
        profile = await fresh_profile(apps[NAMES[-1]], fresh_out, "sim_trace_diff") if fresh_out else None
        return await run_queries(
            apps, queries, real=True, system=system, arrivals=arrivals, steps=steps
        ), profile
    finally:
        for app in apps.values():
            await app.stop()


def sim_side(
    queries: list[dict[str, Any]],
    profile: dict[str, Any],
    replay: dict[str, Any] | None = None,
    system: str = "teola",
    arrivals: list[float] | None = None,
) -> dict[str, Any]:
    return on_simulated_apps(
        NAMES,
        profile,
        lambda apps: run_queries(apps, queries, real=False, replay=replay, system=system, arrivals=arrivals),
    )


def _context_per_seq(runs: list[dict[str, Any]]) -> float:
    """A decoding call's mean context: its prompt tokens plus half its output."""
    calls = [t for r in runs for t in r["trace"] if t.get("op") == PrimOp.DECODING and "fused_into" not in t]
    return (
        statistics.fmean(
            int(t.get("num_prompt_tokens") or 0) + int(t.get("num_output_tokens") or 0) / 2 for t in calls
        )
        if calls
        else 0.0
    )


def token_scale(real: dict[str, Any], sim: dict[str, Any]) -> float:
    """Real prompt tokens of every LLM call over simulated ones, for the same queries."""
    total = lambda side: sum(prompt_tokens(r["trace"]) for runs in side.values() for r in runs)
    return total(real) / max(1, total(sim))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench sim_trace_diff`."""
    p.add_argument(
        "--profile",
        default="cpu-smollm2-135m",
        help="a profile name or file, or 'fresh': measure one on the started engines first",
    )
    p.add_argument("--n", type=int, default=3)
    p.add_argument(
        "--real", help="re-simulate the real traces of an earlier run's JSON instead of running engines"
    )
    p.add_argument(
        "--system", default="teola", choices=tuple(SYSTEMS), help="whose config and policy (default teola)"
    )
    p.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="queries/s of a Poisson trace (seed 0) instead of one query at a time "
        "(default 0: one at a time)",
    )
    p.add_argument(
        "--calibrate-tokens",
        action="store_true",
        help="scale the profile's prompt-token estimate to these queries' real prompt tokens, so the "
        "comparison is of the cost models alone",
    )
    p.add_argument("--out", default="sim_trace_diff")


def recorded_lengths(real: dict[str, list[dict[str, Any]]]) -> dict[str, list[int]]:
    """The real runs' LLM output lengths by kind, sorted (what the simulated LLM then draws from)."""
    lengths: dict[str, list[int]] = {"text": [], "split": []}
    for runs in real.values():
        for run in runs:
            add_lengths(lengths, run["trace"])
    return {k: sorted(v) for k, v in lengths.items() if v}


def step_summaries(
    steps: dict[str, Any], profile: dict[str, Any], real: dict[str, Any], arrivals: list[float] | None
) -> dict[str, Any]:
    """Per app, the summary of its engine's step log against the profile's cost, over its busy time."""
    return {
        name: summary(
            step_rows(
                log,
                profile["engines"]["vllm"]["cost"],
                busy_intervals(real[name], arrivals or []),
                _context_per_seq(real[name]),
            )
        )
        for name, log in steps.items()
    }


def earlier_run(args: argparse.Namespace, p: argparse.ArgumentParser) -> dict[str, Any]:
    """The real side of an earlier run (--real), refused if it ran another system or rate."""
    earlier = json.loads(Path(args.real).read_text(encoding="utf-8"))
    if earlier.get("system", "teola") != args.system:
        p.error(f"--real {args.real} ran {earlier.get('system', 'teola')}, not --system {args.system}")
    if float(earlier.get("rate") or 0.0) != args.rate:
        p.error(f"--real {args.real} ran at rate {earlier.get('rate') or 0}, not --rate {args.rate}")
    return earlier


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench sim_trace_diff` (argv: the options given, for its page)."""
    if args.rate < 0:
        p.error(f"--rate must be >= 0, got {args.rate}")
    if args.real and args.profile == "fresh":
        p.error("--profile fresh measures the engines; with --real none are started: name a profile")
    from engines.sim.profile import load_profile

    fresh = args.profile == "fresh"
    profile = None if fresh else copy.deepcopy(load_profile(args.profile))
    t0 = time.perf_counter()
    if args.real:
        earlier = earlier_run(args, p)
        real, n = earlier["real"], earlier["n"]
    else:
        n = args.n
    queries = doc_qa_queries(n, 10, "truthfulqa", 0)
    arrivals = poisson_arrivals(n, args.rate, 0) if args.rate else None
    steps: dict[str, Any] = dict(earlier.get("steps") or {}) if args.real else {}
    if not args.real:
        real, measured = asyncio.run(
            real_side(queries, args.out if fresh else None, args.system, arrivals, steps)
        )
        profile = measured or profile
    profile["engines"]["vllm"]["lengths"] = recorded_lengths(real)
    strip = lambda side: {
        k: [{"latency": r["latency"], "trace": r["trace"]} for r in v] for k, v in side.items()
    }
    scale = None
    if args.calibrate_tokens:
        scale = token_scale(
            real, sim_side(queries, profile, replay=real, system=args.system, arrivals=arrivals)
        )
        scale_tokens(profile, scale)
    data = {
        "real": strip(real),
        "sim": strip(sim_side(queries, profile, system=args.system, arrivals=arrivals)),
        "replay": strip(sim_side(queries, profile, replay=real, system=args.system, arrivals=arrivals)),
        "n": n,
        "profile": args.profile,
        "system": args.system,
        "rate": args.rate,
        "token_scale": scale,
        "steps": steps,
        "step_summary": step_summaries(steps, profile, real, arrivals),
        "wall_s": time.perf_counter() - t0,
        "command": "python -m bench sim_trace_diff " + " ".join(argv),
    }
    write_results(args.out, data, markdown(data), subject="sim")
    print(markdown(data))
    return 0
