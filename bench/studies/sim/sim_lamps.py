"""SIMULATED: LAMPS vs FCFS with INFERCEPT's handling vs SJF on API-augmented requests (LAMPS Fig. 6
set-up), measured at steady state.

    python -m bench sim_lamps [--profile a100-llama2-7b-measured] [--rates "infercept=1,2;toolbench=2,4"]
                              [--warmup 300] [--window 1200] [--cooldown 300] [--systems ...] [--quick]
    python -m bench sim_lamps --sweep --rates ... --out sim_lamps_sweep   # load per rate, to place the rates
    python -m bench sim_lamps --profile a100-40gb-gptj-6b --max-seqs 256 --kv-admission --lamps-batch 50 \
        --out sim_lamps_memory   # LAMPS' memory-bound regime: GPT-J 6B, a 40 GB A100's KV pool,
                                 # vLLM's admission

Every number here is simulated: teola's runtime (the `lamps` / `sjf` / `fcfs` policies, admission
control) drives one simulated vLLM instance (engines/sim/llm.py, which enforces each pause handling:
engines/sim/admission.py) in virtual time on a derived GPU profile; the simulator's measured error on
this machine is in bench/results/sim/sim_fidelity_probe.md.

Requests: each is one LLM call that pauses for its API k times and continues in the same context
(Program-style segments sharing a kv_key). API types and their durations (mean, std seconds) and
calls per request (mean, std) are the INFERCEPT mix and ToolBench rows of LAMPS Table 2 (taken there
from INFERCEPT Table 1); the type is drawn uniformly per request. Assumed here (the papers give no
distribution): API durations are lognormal with the table's mean and std (as
bench.studies.programs.lamps_real's web tool), tokens written before each API call and for the final answer
are lognormal with mean 40 (clipped to 4..256), API responses add a per-type number of tokens
(RESPONSE_TOKENS), prompts are 100-400 words; a request's calls are capped so the whole context fits the
model.

Systems, all with the same admission (at most --max-seqs calls in the engine, 64 by default; with
--kv-admission also bound by the engine's free KV blocks, as vLLM admits, so calls that cannot get
memory wait in teola's queue in the policy's order: bench/studies/sim/kv_admission.py; a call resuming on KV
its paused call preserved is marked `resumes_preserved`, as teola.api.tool_calls marks it, and fcfs, sjf and
lamps send it first, as INFERCEPT keeps a preserved request in the running batch (the blind `fifo`
does not); each call returns when it ends, as under vLLM's continuous batching; none is preempted):
  - FCFS + INFERCEPT: calls run in arrival order (policy `fcfs`); INFERCEPT's own handling: chosen
    when the call reaches its API call (the simulated engine's `decide_pause`, `infercept_at_pause`),
    the least waste by INFERCEPT's equations with the call's context then, the running batch's other
    context then and the API type's mean duration;
  - SJF: teola ranks waiting calls by predicted tokens (perfect predictions by default, as the
    INFERCEPT dataset records output lengths; with --predictions, the true lengths times the
    predicted/actual ratios a bench.studies.programs.length_predictor run measured on held-out rows, which is
    how LAMPS runs ToolBench, with a learned predictor), INFERCEPT's handling as above;
  - LAMPS: each pausing call is queued with handling "auto", which teola's engine scheduler resolves
    when it queues the call, after its length prediction, with LAMPS' own predictions (prompt +
    predicted pre-API tokens, per-type API duration means, the batch's other context as the profiled
    calls per batch - 1 times the mean admitted context; the profile is --lamps-batch, by default
    measured online: the mean number of calls running at each admission); the call is ranked by
    memory over time under that same handling, and that handling is applied. Starvation threshold
    100 engine iterations, counted once LAMPS has scheduled the request (LAMPS §4.4; set-up key
    `starvation_from`="seen" counts from a call's first sight: teola/scheduling/program/lamps.py).
`--systems vLLM` runs vLLM as INFERCEPT's and LAMPS' scripts run it: FCFS in call order, every pause
discarded (the call after the API is a new request at the back of the queue). INFERCEPT's equation 2
prices recompute at `fwd_seconds_per_token` (a measured-operator profile has no per-token prefill
coefficient: its token table's full chunk over its tokens). bench/studies/sim/sim_lamps_paper.py runs this
module at LAMPS' own set-up (the "single" mix: one API call per request; fixed-length runs, `drain`; no prefix
cache) and varies it (set-up keys: `api_scale` API durations, `length_scale` and `sigma` request lengths and
their spread, `starvation` LAMPS' threshold, `engine_priority` LAMPS' order inside the engine:
EnginePriority). `--systems FIFO-batches+INFERCEPT` runs the earlier baseline, teola's `fifo` policy, which
sends calls as batches whose calls all return when the batch's longest one ends; `FCFS-request+INFERCEPT`
orders calls by their request's arrival (vLLM's FCFS, under which a call continuing after its API
keeps its request's place: bench.studies.sim.kv_admission.RequestOrderFCFS) instead of when each was queued.

Measurement: Poisson arrivals for warm-up + window + cool-down seconds of simulated time; only the
requests arriving inside the window count (bench/studies/sim/sim_lamps_report.py: mean E2E with a 95% interval
from 10 batch means; a steady-state test). The warm-up covers a request's lifetime (the INFERCEPT
mix's p99 is ~280 s, nearly all API time) so the number of requests in the system has settled; the
cool-down keeps the load on while the last measured requests finish. Per point the engine's load
is sampled every simulated second over the window (calls running, calls waiting in teola's queue
and the engine's, paused calls holding KV, KV blocks in use, swap stalls); a point whose waiting
calls pass OVERLOAD stops there as overloaded. Each measured request's time is split into its API
calls, queueing (teola's queue until sent to the engine + the engine's until its first iteration)
and the rest, in the engine (prefill, decode and the swap stalls it shares with its batch).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shlex
import sys
import time
from typing import Any

from bench.lib.results import write_results
from bench.studies.sim.kv_admission import KVAdmission
from bench.studies.sim.sim_lamps_handling import EnginePriority, handling_for, infercept_at_pause
from bench.studies.sim.sim_lamps_load import OVERLOAD, TICK, sample
from bench.studies.sim.sim_lamps_report import markdown, reading, steady, summarize
from bench.studies.sim.sim_lamps_requests import RESPONSE_TOKENS, arriving, segment_call
from bench.studies.sim.sim_lamps_setup import (
    CAP,
    DEFAULT_RATES,
    DEFAULT_SETUP,
    SYSTEMS,
    parse_rates,
    point_config,
)


async def one(
    rt: Any,
    llm: Any,
    r: dict[str, Any],
    system: str,
    costs: dict[str, Any],
    decided: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run request `r` (its segments and API pauses); its latency, time in API calls and time queued
    (in teola's queue until the call went to the engine, then in the engine's until its first iteration).
    `decided`: the handlings the engine chose at the pauses (`infercept_at_pause`), by kv_key."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, r["arrival"] - loop.time()))
    t0 = loop.time()
    policy = rt.schedulers["llm"].policy
    parts = [
        ["system", "You are an assistant that calls tools."],
        ["user", " ".join(f"{r['id']}w{j}" for j in range(r["words"]))],
    ]
    cont: list[Any] = []
    handlings = []
    api_s = queue_s = 0.0
    segs = r["segments"]
    for j in range(len(segs)):
        req = segment_call(r, j, parts, cont, handlings, costs, t0)
        last = j == len(segs) - 1
        context = sum(segs[: j + 1]) + j * RESPONSE_TOKENS[r["type"]] + int(1.3 * r["words"])
        other = sum(s.computed for s in llm.running)
        if not last:
            req["pause_kv"] = handling_for(system, policy, r["type"], context, other, costs)
        sent = loop.time()
        outcome = await rt.submit_call("llm", req, program=r["id"], call_id=f"{r['id']}-{j}", parents=None)
        if not last:  # the handling applied: resolved when queued ("auto") or chosen at the pause
            handlings.append((decided or {}).pop(r["id"], outcome.pause_kv))
        queue_s += (outcome.started if outcome.started is not None else sent) - sent
        queue_s += float(outcome.result.get("queued_s") or 0.0)
        if last:
            break
        cont += [outcome.result["output_token_ids"], " ".join(["res"] * RESPONSE_TOKENS[r["type"]])]
        paused = loop.time()
        await asyncio.sleep(r["apis"][j])
        api_s += loop.time() - paused
        if hasattr(policy, "observe_api"):
            policy.observe_api(r["type"], r["apis"][j])
    rt.end_program(r["id"])
    return {
        "arrival": r["arrival"],
        "latency": loop.time() - t0,
        "api_s": api_s,
        "queue_s": queue_s,
        "handlings": handlings,
    }


async def start_runtime(
    prof: dict[str, Any], policy: str, options: dict[str, Any], setup: dict[str, Any], ranked_engine: bool
) -> tuple[Any, Any]:
    """teola's runtime on one simulated vLLM of `prof` (at most setup's cap calls in it), started, its
    policy wrapped by KV-bound admission and the engine's ranking where the set-up asks."""
    from engines.sim.profile import simulated_engine
    from teola.ir.engine_spec import Engine
    from teola.runtime import Runtime

    cap = setup["cap"]
    llm = simulated_engine("llm", "vllm", prof, {"max_num_seqs": cap})
    rt = Runtime(
        {"llm": Engine("llm", kind="vllm", max_efficient_batch=cap, max_batch=cap)},
        {"llm": llm},
        policy=policy,
        policy_options={policy: options} if options else None,
    )
    await rt.start()
    if setup["kv_admission"]:
        rt.schedulers["llm"].policy = KVAdmission(rt.schedulers["llm"].policy, llm)
    if ranked_engine:
        rt.schedulers["llm"].policy = EnginePriority(rt.schedulers["llm"].policy)
    return rt, llm


async def measure(
    rt: Any, llm: Any, measured: list[Any], warmup: float, window: float, drain: float | None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The load sampled over the window and the measured requests' records: all of them (none once
    overloaded), or with a `drain`, those finished by the window's end + drain, whatever the queue."""
    if drain is None:
        load = await sample(rt, llm, warmup, warmup + window)
        done = [] if load["overloaded_at"] is not None else await asyncio.gather(*measured)
    else:  # a fixed-length run: what finished by the window's end + drain counts, whatever the queue
        load = await sample(rt, llm, warmup, warmup + window, overload=math.inf)
        loop = asyncio.get_running_loop()
        await asyncio.wait(measured, timeout=max(0.0, warmup + window + drain - loop.time()))
        done = [t.result() for t in measured if t.done() and not t.cancelled()]
    return load, list(done)


def run_point(
    profile: str,
    mix: str,
    system: str,
    rate: float,
    warmup: float,
    window: float,
    cooldown: float,
    seed: int = 0,
    setup: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One system at one rate: Poisson arrivals over warmup + window + cooldown seconds; the requests
    arriving in the window are measured (bench.studies.sim.sim_lamps_report.summarize) and the load sampled.
    `setup` (see `engine_setup`): cap (calls teola lets into the engine), kv_blocks (None: the
    profile's), kv_admission (bench.studies.sim.kv_admission), lamps_batch (LAMPS' profiled batch size)."""
    from teola.sim.virtual_loop import run_virtual

    setup = {**DEFAULT_SETUP, **(setup or {})}
    cap = setup["cap"]

    prof, policy, ranked_engine, types, costs, options = point_config(profile, mix, system, setup)
    entry = prof["engines"]["vllm"]
    horizon = warmup + window + cooldown
    reqs = arriving(mix, rate, horizon, int(entry.get("max_model_len", 4096)), seed, types, setup)

    async def scenario() -> dict[str, Any]:
        rt, llm = await start_runtime(prof, policy, options, setup, ranked_engine)
        decided: dict[str, str] = {}
        if system not in ("LAMPS", "vLLM"):
            llm.decide_pause = infercept_at_pause(costs, {r["id"]: r["type"] for r in reqs}, decided)
        tasks = [asyncio.ensure_future(one(rt, llm, r, system, costs, decided)) for r in reqs]
        measured = [t for t, r in zip(tasks, reqs) if warmup <= r["arrival"] < warmup + window]
        try:
            load, done = await measure(rt, llm, measured, warmup, window, setup["drain"])
        finally:  # requests of the cool-down still running only kept the load on
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await rt.stop()
        return {"done": done, "load": load, "stats": dict(llm.stats)}

    t0 = time.perf_counter()
    res = run_virtual(scenario())
    out = {
        "mix": mix,
        "system": system,
        "rate": rate,
        "requests": len(reqs),
        **summarize(res["done"], warmup, window),
        "load": res["load"],
        "unfinished": sum(1 for r in reqs if warmup <= r["arrival"] < warmup + window) - len(res["done"]),
        "preemptions": res["stats"]["preemptions"],
        "wall_s": time.perf_counter() - t0,
    }
    out["steady"] = bool(res["done"]) and steady(
        res["load"]["waiting_series"], TICK, window, out["halves"], cap
    )
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench sim_lamps`."""
    p.add_argument(
        "--profile",
        default="a100-llama2-7b-measured",
        help="simulation profile (default: built from measured A100 operators, "
        "bench/results/sim/gpu_profiles.md)",
    )
    p.add_argument(
        "--rates", default=DEFAULT_RATES, help=f"arrival rates per mix, req/s (default {DEFAULT_RATES})"
    )
    p.add_argument(
        "--warmup", type=float, default=300.0, help="seconds of arrivals before measuring (default 300)"
    )
    p.add_argument("--window", type=float, default=1200.0, help="seconds of arrivals measured (default 1200)")
    p.add_argument("--cooldown", type=float, default=300.0, help="seconds of arrivals after (default 300)")
    p.add_argument("--systems", default=",".join(SYSTEMS), help="systems to run (default all)")
    p.add_argument("--sweep", action="store_true", help="load per rate only: the page shows no comparison")
    p.add_argument("--quick", action="store_true", help="INFERCEPT mix at 1 and 2 req/s, 100 + 200 + 100 s")
    p.add_argument(
        "--max-seqs",
        type=int,
        default=CAP,
        help=f"calls teola lets into the engine at once, also the engine's max_num_seqs (default {CAP}; "
        "vLLM's default is 256)",
    )
    p.add_argument(
        "--kv-blocks",
        type=int,
        default=None,
        help="KV pool of the simulated engine in blocks of the profile's block size (default: the profile's "
        "num_blocks)",
    )
    p.add_argument(
        "--kv-admission",
        action="store_true",
        help="admission bound by KV blocks, as vLLM's: teola sends a call only while the engine has free KV "
        "for it, so the policy's order decides who waits for memory (bench/studies/sim/kv_admission.py); "
        "without it only --max-seqs bounds admission",
    )
    p.add_argument(
        "--lamps-batch",
        type=int,
        default=None,
        help="LAMPS' profiled calls per batch, used to predict the batch's other context in its handling "
        "choice (LAMPS §3.2.1; default: measured online, the mean number of calls running at each "
        "admission)",
    )
    p.add_argument(
        "--predictions",
        default=None,
        metavar="JSON",
        help="SJF and LAMPS get lengths with the error of a measured predictor: each segment's length times "
        "a predicted/actual ratio drawn from the held-out rows of this "
        "bench.studies.programs.length_predictor result (e.g. bench/results/programs/length_predictor.json); "
        "default: the true lengths (an oracle)",
    )
    p.add_argument("--out", default="sim_lamps")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench sim_lamps` (argv: the options given, for its page)."""
    from engines.sim.profile import load_profile

    blocks = args.kv_blocks or int(load_profile(args.profile)["engines"]["vllm"].get("num_blocks", 0))
    setup = {
        "cap": args.max_seqs,
        "kv_blocks": blocks,
        "kv_admission": args.kv_admission,
        "lamps_batch": args.lamps_batch,
        "predictions": args.predictions,
    }
    mixes = {"infercept": (1.0, 2.0)} if args.quick else parse_rates(args.rates)
    warmup, window, cooldown = (
        (100.0, 200.0, 100.0) if args.quick else (args.warmup, args.window, args.cooldown)
    )
    systems = [s for s in args.systems.split(",") if s]
    t0 = time.perf_counter()
    data: dict[str, Any] = {
        "profile": args.profile,
        "warmup": warmup,
        "window": window,
        "cooldown": cooldown,
        "sweep": args.sweep,
        "setup": setup,
        "mixes": {},
    }
    for mix, rates in mixes.items():
        rows = data["mixes"][mix] = []
        for rate in rates:
            for system in systems:
                rows.append(run_point(args.profile, mix, system, rate, warmup, window, cooldown, setup=setup))
                r = rows[-1]
                print(
                    f"[sim_lamps] {mix} {rate:g}/s {system}: mean {r['mean_s']:.2f} s (api {r['api_s']:.1f} "
                    f"queue {r['queue_s']:.1f} engine {r['engine_s']:.1f}) running "
                    f"{r['load']['running']:.1f} waiting "
                    f"{r['load']['waiting_first']:.0f}->{r['load']['waiting_last']:.0f} kv "
                    f"{r['load']['kv_used']:.2f} steady {r['steady']} ({r['wall_s']:.0f} s wall)",
                    file=sys.stderr,
                    flush=True,
                )
    data["wall_s"] = time.perf_counter() - t0
    data["nice"] = os.nice(0)
    data["command"] = "python -m bench sim_lamps " + shlex.join(argv)
    for rows in data["mixes"].values():
        for r in rows:
            r["load"].pop("waiting_series")
    page = markdown(data, args.max_seqs, OVERLOAD)
    write_results(args.out, data, page if args.sweep else page + "\n" + reading(data) + "\n", subject="sim")
    return 0
