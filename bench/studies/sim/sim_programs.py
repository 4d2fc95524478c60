"""SIMULATED: Autellix Fig. 11-style program latency vs arrival rate on a derived GPU profile.

    python -m bench sim_programs [--profile a100-llama2-7b-measured] [--programs 150] [--quick] [--nocache-baseline]

Every number here is simulated: teola's runtime (program policies, the preemptor that aborts and
resumes calls, balancers) drives simulated vLLM instances (engines/sim/llm.py) in virtual time; the
profile is derived from published figures (engines/profiles/<profile>.json), not measured. The
simulator's measured error on this machine is in bench/results/sim_fidelity_probe.md.

Workloads at Autellix's shapes (teola/sim/program_workloads.py generators, Poisson arrivals, seed 1): chat
(single-threaded, long-tailed calls per program, output mean 60 / max 400 tokens; a call keeps the
last 9,000 characters of its conversation, so it fits Llama-2's 4,096-token context) and tree
(multi-threaded, 2-4 steps of 2-8 parallel calls, output mean 25 / max 120), prompts from shipped
NQ-open questions. More kinds take Autellix's published statistics (§6.1) instead: sharegpt
(calls per program lognormal, mean 6.66, max 80; 256 new user tokens padded from shipped Wikipedia
text and 277 decode tokens per call, both exponential) and lats (8-24 steps of 5-15 parallel calls,
~160 calls, 72.6 decode tokens), with bfcl (lognormal calls, mean 10.75, max 70; 735 new tokens and
34.1 decode tokens per call) and mixed (each program drawn equally from sharegpt, bfcl and lats, as
Autellix's Mixed); on a profile with at least 32k context (a100-llama3.1-8b,
Autellix's model and GPU) conversations are kept whole. Policies FCFS / MLFQ / PLAS / ATLAS (FCFS: policy `fcfs`, vLLM's order with each
call returning when it ends; `--baseline fifo` runs teola's batching strawman instead, as the pages
before commit 82110ed did); teola's preemption either recomputes a
resumed call (abort, re-prefill mostly from the prefix cache), swaps its KV out and back in
(`abort_kv="swap"` at the profile's PCIe swap cost), or swaps only when a round trip is cheaper
than recomputing what the prefix cache will have lost (`abort_kv="auto"`, mode "auto"); 1 instance, and 4 instances with the
locality-aware balancer. Rates are fractions of the FCFS capacity: the decoded tokens per second a
burst of 6 x the admission budget x instances programs at t=0 sustained while the budget was full,
over a program's mean decoded tokens (saturated_capacity; pages before it used programs / makespan).
Latency is reported as program latency and as Autellix's program-level token latency (a program's
latency over the tokens it decoded, its §6.2 metric); throughput at equal latency is given for both.
`--nocache-baseline` adds Autellix's "vLLM" baseline, FCFS with the prefix cache off (`fcfs-nocache`).
"""
from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time
from typing import Any

from bench.lib.results import write_results
from bench.lib.tables import line, num, rule, table
from teola.sim.program_runs import BASELINES, FCFS_TEXT, load_texts, policy_options, rates_at_target, run_set
from teola.sim.program_workloads import ProgramSpec, workload

POLICIES = ("mlfq", "plas", "atlas")  # each against FCFS, the baseline (--baseline)
SHAPES = {"chat": {"max_calls": 24, "out_mean": 60, "out_max": 400},
          "tree": {"steps": (2, 4), "width": (2, 8), "out_mean": 25, "out_max": 120},
          # Autellix's published workload statistics (§6.1, Fig. 11), not tuned here. ShareGPT: calls per
          # program long-tailed, mean 6.66, max 80; 256 prefill (new user) and 277 decode tokens per call.
          "sharegpt": {"max_calls": 80, "calls_mean": 6.66, "user_mean": 256, "user_max": 1024, "out_mean": 277,
                       "out_max": 1024},
          # BFCL v3 (ReAct tool loops): 10.75 calls per program (max 70), 735.06 prefill and 34.14 decode
          # tokens per call; the prefill is taken as new tokens per call, as ShareGPT's 256 is
          "bfcl": {"max_calls": 70, "calls_mean": 10.75, "user_mean": 735, "user_max": 2048, "out_mean": 34.14,
                   "out_max": 400},
          # LATS (MCTS on HotpotQA): 159.7 calls per program, 72.6 decode tokens per call (its 467 prefill
          # tokens are not set: a call's prompt is the question plus its parents' outputs)
          "lats": {"steps": (8, 24), "width": (5, 15), "out_mean": 72.6, "out_max": 400}}
GENERATOR = {"chat": "chat", "tree": "tree", "sharegpt": "chat", "bfcl": "chat", "lats": "tree"}
MIXED = ("sharegpt", "bfcl", "lats")  # Autellix's Mixed workload: programs sampled equally from these (§6.1)
KINDS = (*SHAPES, "mixed")
WINDOW = 9000  # characters of conversation a chat call keeps (~2,500 tokens: fits Llama-2's 4,096)
LONG_CONTEXT = 32768  # a profile with at least this context keeps whole conversations (no window)
BUDGET = 64  # running calls admitted per instance (the engine's max efficient batch)
LOADS = (0.5, 0.8, 1.0, 1.2, 1.5)
MODES = {"drop": "recompute", "swap": "swap", "auto": "swap when worth it (auto)"}
# Autellix's "vLLM" baseline (§6.2): FCFS with vLLM's prefix caching off, the baseline of its 4-15x
# (its "vLLM-opt", with prefix caching, is what `fcfs` runs here)
NOCACHE = "fcfs-nocache"
TARGETS = (1.5, 3, 5, 10)  # latency targets for throughput at equal latency, x the baseline's lowest-load value
METRICS = {"mean": "mean program latency",
           "tok_mean": "mean token latency (Autellix's: a program's latency over the tokens it decoded)"}


def run_once(profile: dict[str, Any], kind: str, policy: str, rate: float, n: int, instances: int,
             abort_kv: str, questions: list[str], filler: list[str], seed: int = 1,
             promotion: str = "preempt", balancer: str = "locality") -> dict[str, Any]:
    """`n` programs of `kind` at `rate` under `policy` on `instances` simulated vLLM instances of
    `profile` (routed by `balancer` when more than one), run to completion in virtual time:
    teola.sim.program_runs.run_set's statistics with every call's record ("log")."""
    from teola import Engine
    from teola.runtime import Runtime
    from teola.sim.virtual_loop import run_virtual

    cache = {"enable_prefix_caching": False} if policy == NOCACHE else {}
    policy = "fcfs" if policy == NOCACHE else policy
    prof = {**profile, "engines": {**profile["engines"],
                                   "vllm": {**profile["engines"]["vllm"], "abort_kv": abort_kv, **cache}}}
    progs = programs(kind, rate, n, seed)
    llm = profile["engines"]["vllm"]
    ratio = llm.get("token_ratio", 1.3)
    window = None if llm.get("max_model_len", 0) >= LONG_CONTEXT else WINDOW
    routing = {"balancer": balancer} if instances > 1 else {}

    async def scenario() -> dict[str, Any]:
        spec = Engine("llm", kind="vllm", instances=instances, max_efficient_batch=BUDGET, admission="efficient_batch",
                      simulate=prof, **routing)
        rt = Runtime({"llm": spec}, policy=policy, policy_options={policy: policy_options(policy, promotion=promotion)})
        await rt.start()
        try:
            return await run_set(rt, progs, f"{kind}-{policy}-{rate:.3f}", questions, window=window, filler=filler,
                                 token_ratio=ratio, keep_log=True)
        finally:
            await rt.stop()
    wall = time.perf_counter()
    out = run_virtual(scenario())
    out["sim_wall_s"] = time.perf_counter() - wall
    return out


def programs(kind: str, rate: float, n: int, seed: int = 1) -> list[ProgramSpec]:
    """`n` programs of `kind` with Poisson arrivals at `rate` programs/s (0: all at t=0). "mixed"
    draws each program's kind uniformly from MIXED and takes that kind's next program (the same
    programs at every rate)."""
    if kind != "mixed":
        return workload(GENERATOR[kind], rate, n, seed, [1], **SHAPES[kind])
    rng = random.Random(seed)
    pools = {k: iter(workload(GENERATOR[k], 0.0, n, seed, [1], **SHAPES[k])) for k in MIXED}
    t, out = 0.0, []
    for _ in range(n):
        gap = rng.expovariate(rate if rate > 0 else 1.0)  # drawn either way, as in program_workloads.workload
        t += gap if rate > 0 else 0.0
        k = rng.choice(MIXED)
        p = next(pools[k])
        out.append(dataclasses.replace(p, pid=f"{k}-{p.pid}", arrival=t))
    return out


def shape_stats(kind: str, n: int) -> dict[str, float]:
    """What the generator draws for `n` programs of `kind` (seed 1): calls per program (mean, max),
    decode and new-user tokens per call (means), to set beside the published statistics."""
    progs = programs(kind, 0.0, n)
    calls = [c for p in progs for c in p.calls]
    return {"calls_mean": len(calls) / n, "calls_max": max(len(p.calls) for p in progs),
            "out_mean": sum(c.output for c in calls) / len(calls), "user_mean": sum(c.user for c in calls) / len(calls)}


def saturated_capacity(log: list[dict[str, Any]], n: int, budget: int) -> float:
    """Programs/s a burst of `n` programs sustained while the engines were full: decoded tokens per
    second up to the moment fewer than `budget` programs were left, over the mean decoded tokens of
    a program. (Programs / makespan undercounts it: a burst ends with its longest program's calls
    running one after another on an almost empty engine.)"""
    ends: dict[str, float] = {}
    for c in log:
        ends[c["program"]] = max(ends.get(c["program"], 0.0), c["end"])
    done = sorted(ends.values())
    per_program = sum(c["output"] or 0 for c in log) / n
    if n <= budget or per_program <= 0:
        return n / done[-1]
    t_sat = done[n - budget]
    return sum(c["output"] or 0 for c in log if c["end"] <= t_sat) / t_sat / per_program


def sweep(profile: dict[str, Any], kind: str, n: int, instances: int, abort_kv: str, questions: list[str],
          filler: list[str], loads: tuple[float, ...], baseline: str = "fcfs", nocache: bool = False,
          promotion: str = "preempt") -> dict[str, Any]:
    n_burst = max(n, 6 * BUDGET * instances)
    burst = run_once(profile, kind, baseline, 0.0, n_burst, instances, abort_kv, questions, filler)
    cap = saturated_capacity(burst["log"], n_burst, BUDGET * instances)
    rows = []
    bases = (baseline, NOCACHE) if nocache else (baseline,)
    for load in loads:
        for policy in (*bases, *POLICIES):
            r = run_once(profile, kind, policy, load * cap, n, instances, abort_kv, questions, filler,
                         promotion=promotion)
            rows.append({"load": load, "rate": load * cap, "policy": policy,
                         **{k: r[k] for k in ("mean", "p50", "p95", "p99", "tok_mean", "tok_p99", "preemptions", "resumed_tokens",
                                              "resumed_cached_tokens", "sim_wall_s", "calls", "prompt_tokens", "cached_tokens",
                                              "output_tokens")}})
            print(f"[sim_programs] {kind} x{instances} {abort_kv} load {load} {policy}: mean {r['mean']:.1f} s, "
                  f"{r['preemptions']} preemptions ({r['sim_wall_s']:.0f} s wall)", file=sys.stderr, flush=True)
    target, tput = rates_at_target(rows, (baseline, *POLICIES), baseline)
    return {"capacity": cap, "rows": rows, "target_s": target, "rate_at_target": tput, "baseline": baseline}


def markdown(data: dict[str, Any]) -> str:
    title = "" if data.get("out", "sim_programs") == "sim_programs" else f", loads {', '.join(map(str, data['loads']))}"
    if data.get("promotion", "preempt") != "preempt":
        title += f", anti-starvation promotion {data['promotion']!r}"
    lines = [f"## SIMULATED: program-level scheduling at Autellix's shapes{title} (bench/studies/sim/sim_programs.py)", "",
             f"**Simulated, not measured**, on the derived profile `{data['profile']}` (engines/profiles/). "
             f"Command: `{data['command']}` ({data['wall_s'] / 60:.1f} min wall). {data['programs']} programs per point; "
             f"admission budget {BUDGET} running calls per instance; rates are fractions of FCFS's "
             + ("capacity: decoded tokens/s while a burst kept the admission budget full, over a program's mean "
                "decoded tokens (bench.studies.sim.sim_programs.saturated_capacity). " if data.get("capacity") == "saturated"
                else "burst capacity (programs / makespan of a burst). ") +
             "Throughput at equal latency: the highest rate at which a policy's mean program latency stays within "
             "1.5x FCFS's mean at the lowest load (linear interpolation between measured rates, no extrapolation).", ""]
    if data.get("shapes"):
        lines += ["Workloads as generated (seed 1; per call: decode tokens and new user tokens, 0 meaning one "
                  "shipped question):", "", *shapes_table(data["shapes"]), ""]
    for key, res in data["sweeps"].items():
        kind, inst, mode = key.split("|")
        tok = "tok_mean" in res["rows"][0]  # pages before the token-latency columns lack them
        lines += [f"### {kind}, {inst} instance(s), preemption by {mode} (capacity {res['capacity']:.2f} programs/s)",
                  "", *sweep_table(res["rows"], tok)]
        t = res["rate_at_target"]
        base = res.get("baseline", "fifo")  # pages before commit 82110ed ran the fifo strawman
        f = t.get(base)
        top = max(r["rate"] for r in res["rows"])
        bound = lambda p: ">= " if t[p] >= top - 1e-9 else ""  # under the target at the highest rate swept
        ratios = ", ".join(f"{p} {bound(p)}{t[p] / f:.2f}x" if (t[p] and f) else f"{p} n/a"
                           for p in POLICIES)
        bounded = any(bound(p) for p in POLICIES if t[p])
        lines += ["", f"FCFS here is {FCFS_TEXT[base]}.",
                  "", f"Rate at mean latency <= {res['target_s']:.1f} s: FCFS {f if f is None else round(f, 3)} "
                  f"programs/s; vs FCFS: {ratios}" + (" ('>=': still under the target at the highest rate swept, so a "
                                                       "lower bound)" if bounded else "") + ".", ""]
        if tok:
            lines += equal_latency_table(res, top)
    return "\n".join(lines) + "\n"


def shapes_table(shapes: dict[str, Any]) -> list[str]:
    """The workloads as generated: shape, calls per program, decode and new user tokens per call."""
    return table(["workload", "shape", "calls per program (mean / max)", "decode / call", "new user tokens / call"],
                 ([k, f"`{SHAPES[k]}`" if k in SHAPES else f"each program one of {', '.join(MIXED)}, drawn uniformly",
                   f"{v['calls_mean']:.2f} / {v['calls_max']}", num(v["out_mean"], 0), num(v["user_mean"], 0)]
                  for k, v in shapes.items()), "llrrr")


def sweep_table(rows: list[dict[str, Any]], tok: bool) -> list[str]:
    """One sweep's rows; `tok`: with the token-latency and prefix-cache columns (pages before them lack them)."""
    extra = ["token latency, mean / p99 (ms per decoded token)", "prompt tokens from the prefix cache"] if tok else []
    return table(["load", "rate", "policy", "mean (s)", "p50", "p95", "p99", *extra, "preemptions",
                  "re-sent tokens (cached)"],
                 ([num(r["load"], 2), num(r["rate"], 3), r["policy"], *(num(r[k]) for k in ("mean", "p50", "p95", "p99")),
                   *([f"{1000 * r['tok_mean']:.0f} / {1000 * r['tok_p99']:.0f}",
                      f"{r['cached_tokens'] / max(1, r['prompt_tokens']):.1%}"] if tok else []),
                   r["preemptions"], f"{r['resumed_tokens']} ({r['resumed_cached_tokens']})"] for r in rows),
                 "rrlrrrr" + "rr" * tok + "rr")


def equal_latency_table(res: dict[str, Any], top: float) -> list[str]:
    """Throughput at equal latency against each baseline on each metric (METRICS) and at several
    targets (TARGETS x the baseline's value at the lowest load): the baseline's rate under the
    target and each policy's ratio to it (teola.sim.program_runs.rates_at_target on the page's rows)."""
    rows = res["rows"]
    first = res.get("baseline", "fcfs")
    bases = [b for b in (first, NOCACHE) if any(r["policy"] == b for r in rows)]
    cols = (first, *POLICIES) if NOCACHE in bases else POLICIES  # against NOCACHE, FCFS with the cache too
    lines = ["Throughput at equal latency, per baseline, metric and target (the target is a multiple of the "
             "baseline's value at the lowest load; '>=': still under the target at the highest rate swept, so a "
             "lower bound; 'n/a': over it at the lowest rate, or the baseline never reached it):",
             "", line(["baseline", "latency metric", "target", "baseline's rate (programs/s)", *cols]),
             rule("llrr" + "r" * len(cols))]
    for base in bases:
        label = "FCFS, no prefix cache (Autellix's vLLM)" if base == NOCACHE else f"FCFS (`{base}`)"
        for metric in METRICS:
            for factor in TARGETS:
                target, rates = rates_at_target(rows, (base, *cols), base, factor=factor, key=metric)
                f = rates.get(base)
                unit = f"{target:.1f} s" if metric == "mean" else f"{1000 * target:.0f} ms/token"
                capped = f is not None and f >= top - 1e-9  # the baseline never reached the target: no ratio
                cell = lambda p: ("n/a" if not (rates[p] and f) or capped else
                                  (">= " if rates[p] >= top - 1e-9 else "") + f"{rates[p] / f:.2f}x")
                rate = "n/a" if f is None else (">= " if capped else "") + f"{f:.3f}"
                lines.append(line([label, METRICS[metric], f"{factor}x ({unit})", rate, *(cell(p) for p in cols)]))
    return lines + [""]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench sim_programs`."""
    p.add_argument("--profile", default="a100-llama2-7b-measured",
                   help="simulation profile (default: built from measured A100 operators, bench/results/gpu_profiles.md)")
    p.add_argument("--programs", type=int, default=300)
    p.add_argument("--quick", action="store_true", help="chat only, 1 instance, recompute, 30 programs, 2 loads")
    p.add_argument("--instances", default="1,4", help="instance counts to sweep (default 1,4)")
    p.add_argument("--loads", help=f"fractions of the FCFS capacity to sweep (default {','.join(map(str, LOADS))}); "
                   "extend them until every policy's mean passes the latency target, or its rate is a lower bound")
    p.add_argument("--kinds", default="chat,tree", help=f"workload shapes, from: {', '.join(KINDS)} (sharegpt, bfcl and "
                   "lats take Autellix's published per-workload statistics; mixed samples those three equally)")
    p.add_argument("--modes", default="drop,swap", help="preemption modes: drop (recompute), swap, auto (swap "
                   "when worth it, counting the prefix cache's survival: engines/kv_swap_choice.save_pays)")
    p.add_argument("--baseline", choices=BASELINES, default="fcfs",
                   help="FCFS as vLLM runs it (fcfs, default) or teola's fifo batching strawman (the pages before 82110ed)")
    p.add_argument("--nocache-baseline", action="store_true",
                   help=f"also run {NOCACHE}: FCFS with the prefix cache off, Autellix's 'vLLM' baseline")
    p.add_argument("--promotion", choices=("preempt", "admit"), default="preempt",
                   help="anti-starvation promotion of MLFQ / PLAS / ATLAS: preempt (Autellix's Algorithm 1, default) "
                   "or admit (a promoted call preempts only from the queue it was promoted from)")
    p.add_argument("--out", default="sim_programs")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench sim_programs` (argv: the options given, for its page)."""
    from engines.sim.profile import load_profile
    profile = load_profile(args.profile)
    questions, filler, _ = load_texts()
    t0 = time.perf_counter()
    n = 30 if args.quick else args.programs
    combos = [("chat", 1, "drop")] if args.quick else [
        (k, i, m) for k in args.kinds.split(",") for i in map(int, args.instances.split(","))
        for m in args.modes.split(",")]
    for kind in {k for k, _, _ in combos} - set(KINDS):
        p.error(f"unknown workload kind {kind!r}; choose from {', '.join(KINDS)}")
    for mode in {m for _, _, m in combos} - set(MODES):
        p.error(f"unknown preemption mode {mode!r}; choose from {', '.join(MODES)}")
    loads = (0.8, 1.2) if args.quick else tuple(map(float, args.loads.split(","))) if args.loads else LOADS
    sweeps = {}
    for kind, inst, mode in combos:
        sweeps[f"{kind}|{inst}|{MODES[mode]}"] = sweep(
            profile, kind, n * inst, inst, mode, questions, filler, loads, args.baseline, args.nocache_baseline,
            args.promotion)
    shapes = {k: shape_stats(k, n) for k in dict.fromkeys(k for k, _, _ in combos)}
    data = {"profile": args.profile, "programs": n, "promotion": args.promotion, "sweeps": sweeps, "shapes": shapes, "capacity": "saturated", "loads": loads, "out": args.out, "wall_s": time.perf_counter() - t0,
            "command": "python -m bench sim_programs " + " ".join(argv)}
    write_results(args.out, data, markdown(data))
    return 0
