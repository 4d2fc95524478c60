"""SIMULATED: LAMPS vs FCFS with INFERCEPT's handling vs SJF on API-augmented requests (LAMPS Fig. 6 set-up).

    python -m bench.sim_lamps [--profile a100-llama2-7b] [--requests 200] [--quick]

Every number here is simulated: teola's runtime (the `lamps` / `sjf` / `fifo` policies, admission
control) drives one simulated vLLM instance (engines/sim_llm.py, which enforces each pause handling:
engines/sim_admission.py) in virtual time on a derived GPU profile; the simulator's measured error on
this machine is in bench/results/sim_fidelity.md.

Requests: each is one LLM call that pauses for its API k times and continues in the same context
(Program-style segments sharing a kv_key). API types and their durations (mean, std seconds) and
calls per request (mean, std) are the INFERCEPT mix and ToolBench rows of LAMPS Table 2 (taken there
from INFERCEPT Table 1); the type is drawn uniformly per request. Assumed here (the papers give no
distribution): tokens written before each API call and for the final answer are lognormal with mean
40 (clipped to 4..256), API responses add a per-type number of tokens (RESPONSE_TOKENS), prompts are
100-400 words; a request's calls are capped so the whole context fits the model.

Systems, all with the same concurrency (CAP calls in the engine):
  - FCFS + INFERCEPT: calls go to the engine in arrival order; at each API call the handling with
    the least waste by INFERCEPT's equations with the batch's actual other context at that moment;
  - SJF: teola ranks waiting calls by predicted tokens (perfect predictions, as the INFERCEPT dataset
    records output lengths), INFERCEPT's handling;
  - LAMPS: teola ranks waiting calls by memory over time under the handling it predicts before
    scheduling (per-type API duration means; the batch's other context predicted as CAP - 1 calls of
    the mean admitted context), starvation threshold 100; that handling is used.
"""
from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import write_results

MIXES = {
    "infercept": {"math": ((9e-5, 6e-5), (3.75, 1.3)), "qa": ((0.69, 0.17), (2.52, 1.73)),
                  "ve": ((0.09, 0.014), (28.18, 15.2)), "chatbot": ((28.6, 15.6), (4.45, 1.96)),
                  "image": ((20.03, 7.8), (6.91, 3.93)), "tts": ((17.24, 7.6), (6.91, 3.93))},
    "toolbench": {"toolbench": ((1.72, 3.33), (2.45, 1.81))},
}
RESPONSE_TOKENS = {"math": 8, "qa": 48, "ve": 24, "chatbot": 40, "image": 12, "tts": 8, "toolbench": 96}
SYSTEMS = {"FCFS+INFERCEPT": "fifo", "SJF": "sjf", "LAMPS": "lamps"}
CAP = 64           # calls running in the engine at once, for every system
OUT_MEAN = 40


def requests(mix: str, n: int, rate: float, max_len: int, seed: int, types: dict[str, Any] | None = None,
             out_cap: int = 256) -> list[dict[str, Any]]:
    """n requests with Poisson arrivals at `rate` per second (see the module docstring); `types`
    replaces the mix's API types (name -> ((duration mean, std), (calls mean, std))), `out_cap`
    the largest segment."""
    rng = random.Random(f"{mix}:{seed}")
    types = MIXES[mix] if types is None else types
    t, out = 0.0, []
    sigma = 0.8
    mu = math.log(OUT_MEAN) - sigma * sigma / 2
    for i in range(n):
        t += rng.expovariate(rate)
        kind = rng.choice(sorted(types))
        (d_mean, d_std), (k_mean, k_std) = types[kind]
        words = rng.randint(100, 400)
        k = max(1, round(rng.gauss(k_mean, k_std)))
        segs = [min(out_cap, max(4, round(rng.lognormvariate(mu, sigma)))) for _ in range(k + 1)]
        budget = max_len - 1.3 * words - 128  # words and response words count ~1.3 tokens; template tokens
        while k > 1 and sum(segs) + 1.3 * k * RESPONSE_TOKENS.get(kind, 48) > budget:
            k -= 1
            segs.pop()
        apis = [max(1e-5, rng.gauss(d_mean, d_std)) for _ in range(k)]
        out.append({"id": f"r{i}", "arrival": t, "type": kind, "words": words, "segments": segs, "apis": apis})
    return out


def handling_for(system: str, policy: Any, kind: str, context: int, other: int, costs: dict[str, float]) -> str:
    from teola.runtime import choose_handling
    from teola.tool_calls import choose_pause_handling
    if system == "LAMPS":  # predicted before scheduling with the profiled batch's context, as its ranking did
        return choose_pause_handling(policy, kind, context)
    mean = costs["api_means"][kind]
    return choose_handling(mean, context, other, costs["fwd"] * context, costs["swap"] * context)


async def one(rt: Any, llm: Any, r: dict[str, Any], system: str, costs: dict[str, float]) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, r["arrival"] - loop.time()))
    t0 = loop.time()
    policy = rt.schedulers["llm"].policy
    parts = [["system", "You are an assistant that calls tools."],
             ["user", " ".join(f"{r['id']}w{j}" for j in range(r["words"]))]]
    cont: list[Any] = []
    handlings = []
    segs = r["segments"]
    for j, out in enumerate(segs):
        req = {"parts": parts, "complete": True, "max_tokens": out, "ignore_eos": True, "continuation": list(cont),
               "kv_key": r["id"], "predicted_tokens": out}
        last = j == len(segs) - 1
        if not last:
            req.update(api=r["type"], post_tokens=segs[j + 1], api_response_tokens=RESPONSE_TOKENS[r["type"]])
        context = sum(segs[:j + 1]) + j * RESPONSE_TOKENS[r["type"]] + int(1.3 * r["words"])
        other = sum(s.computed for s in llm.running)
        if not last:
            req["pause_kv"] = handling_for(system, policy, r["type"], context, other, costs)
            handlings.append(req["pause_kv"])
        outcome = await rt.submit_call("llm", req, program=r["id"], call_id=f"{r['id']}-{j}", parents=None)
        if last:
            break
        cont += [outcome.result["output_token_ids"], " ".join(["res"] * RESPONSE_TOKENS[r["type"]])]
        await asyncio.sleep(r["apis"][j])
        if hasattr(policy, "observe_api"):
            policy.observe_api(r["type"], r["apis"][j])
    rt.end_program(r["id"])
    return {"latency": loop.time() - t0, "handlings": handlings}


def run_point(profile: str, mix: str, system: str, rate: float, n: int, seed: int = 0) -> dict[str, Any]:
    from engines.sim_profile import load_profile, simulated_engine
    from teola.engine_spec import Engine
    from teola.runtime import Runtime
    from teola.sim.virtual_loop import run_virtual

    prof = load_profile(profile)
    entry = prof["engines"]["vllm"]
    cost, block = entry["cost"], int(entry.get("block_size", 16))
    means = {k: v[0][0] for k, v in MIXES[mix].items()}
    costs = {"fwd": cost["prefill_token"], "swap": float(entry.get("swap_seconds_per_block", 0.0)) / block,
             "api_means": means}
    policy = SYSTEMS[system]
    options = {"lamps": {"step_s": cost["base"] + CAP * cost["decode_seq"], "fwd_s_per_token": costs["fwd"],
                         "swap_s_per_token": costs["swap"], "api_defaults": means,
                         "batch_size": CAP}}.get(policy, {})
    reqs = requests(mix, n, rate, int(entry.get("max_model_len", 4096)), seed)

    async def main() -> dict[str, Any]:
        llm = simulated_engine("llm", "vllm", prof, {"max_num_seqs": CAP})
        rt = Runtime({"llm": Engine("llm", kind="vllm", max_efficient_batch=CAP, max_batch=CAP)}, {"llm": llm},
                     policy=policy, policy_options={policy: options} if options else None)
        await rt.start()
        try:
            done = await asyncio.gather(*(one(rt, llm, r, system, costs) for r in reqs))
        finally:
            await rt.stop()
        return {"done": done, "stats": dict(llm.stats)}

    t0 = time.perf_counter()
    res = run_virtual(main())
    lat = sorted(d["latency"] for d in res["done"])
    counts = {h: sum(d["handlings"].count(h) for d in res["done"]) for h in ("preserve", "discard", "swap")}
    return {"mix": mix, "system": system, "rate": rate, "requests": n, "mean_s": statistics.fmean(lat),
            "p99_s": lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))], "handlings": counts,
            "preemptions": res["stats"]["preemptions"], "wall_s": time.perf_counter() - t0}


def markdown(data: dict[str, Any]) -> str:
    lines = ["## SIMULATED: LAMPS vs FCFS + INFERCEPT vs SJF on API-augmented requests (issue 18)", "",
             f"Command: `{data['command']}` ({data['wall_s'] / 60:.1f} min). **Simulated** on the derived "
             f"`{data['profile']}` profile (not measured); one instance, {CAP} calls in the engine for every system. "
             "Workload and assumptions: bench/sim_lamps.py's docstring (INFERCEPT / ToolBench API mixes from "
             "LAMPS Table 2; segment lengths assumed). The simulator's error on this machine: "
             "bench/results/sim_fidelity.md.", "",
             "| mix | rate (req/s) | system | mean E2E (s) | p99 E2E (s) | LAMPS vs system (mean) | handlings "
             "(preserve / discard / swap) | engine preemptions |", "|---|---:|---|---:|---:|---:|---|---:|"]
    for mix, rows in data["mixes"].items():
        for rate in sorted({r["rate"] for r in rows}):
            at = {r["system"]: r for r in rows if r["rate"] == rate}
            lamps = at.get("LAMPS")
            for system, r in at.items():
                delta = "" if lamps is None or system == "LAMPS" else f"{100 * (lamps['mean_s'] / r['mean_s'] - 1):+.0f}%"
                h = r["handlings"]
                lines.append(f"| {mix} | {rate:g} | {system} | {r['mean_s']:.2f} | {r['p99_s']:.2f} | {delta} | "
                             f"{h['preserve']} / {h['discard']} / {h['swap']} | {r['preemptions']} |")
    return "\n".join(lines) + "\n\n" + reading(data) + "\n"


def reading(data: dict[str, Any]) -> str:
    """The ranges of LAMPS's change in mean latency per mix, and how much of a request is API time."""
    out = ["**Reading** (all simulated; target from the issue: LAMPS -40% or better vs FCFS + INFERCEPT)."]
    for mix, rows in data["mixes"].items():
        vs: dict[str, list[float]] = {"FCFS+INFERCEPT": [], "SJF": []}
        for rate in {r["rate"] for r in rows}:
            at = {r["system"]: r for r in rows if r["rate"] == rate}
            for other in vs:
                if "LAMPS" in at and other in at:
                    vs[other].append(100 * (at["LAMPS"]["mean_s"] / at[other]["mean_s"] - 1))
        api = statistics.fmean(sum(r["apis"]) for r in requests(mix, data["requests"], 1.0, 4096, 0))
        out.append(f"{mix}: LAMPS {min(vs['FCFS+INFERCEPT']):+.0f}% to {max(vs['FCFS+INFERCEPT']):+.0f}% vs FCFS + "
                   f"INFERCEPT and {min(vs['SJF']):+.0f}% to {max(vs['SJF']):+.0f}% vs SJF in mean latency; a request "
                   f"spends {api:.1f} s in its API calls on average, which no schedule shortens.")
    return " ".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.sim_lamps", description="SIMULATED LAMPS vs INFERCEPT vs SJF")
    p.add_argument("--profile", default="a100-llama2-7b")
    p.add_argument("--requests", type=int, default=200, help="requests per point (default 200)")
    p.add_argument("--rates", default="2,4,6,8,10", help="arrival rates, requests/s (default 2,4,6,8,10)")
    p.add_argument("--quick", action="store_true", help="INFERCEPT mix, 40 requests, rates 2 and 6")
    p.add_argument("--out", default="sim_lamps")
    args = p.parse_args(argv)
    rates = (2.0, 6.0) if args.quick else tuple(float(x) for x in args.rates.split(","))
    n = 40 if args.quick else args.requests
    mixes = ("infercept",) if args.quick else tuple(MIXES)
    t0 = time.perf_counter()
    data: dict[str, Any] = {"profile": args.profile, "requests": n, "mixes": {}}
    for mix in mixes:
        rows = data["mixes"][mix] = []
        for rate in rates:
            for system in SYSTEMS:
                rows.append(run_point(args.profile, mix, system, rate, n))
                r = rows[-1]
                print(f"[sim_lamps] {mix} {rate:g}/s {system}: mean {r['mean_s']:.2f} s p99 {r['p99_s']:.2f} s "
                      f"({r['wall_s']:.0f} s wall)", file=sys.stderr, flush=True)
    data["wall_s"] = time.perf_counter() - t0
    data["command"] = "python -m bench.sim_lamps " + " ".join(argv if argv is not None else sys.argv[1:])
    write_results(args.out, data, markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
