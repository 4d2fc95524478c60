"""SIMULATED: LAMPS' end-to-end experiment (its §6.1-6.2, Fig. 6, GPT-J 6B) at its set-up: LAMPS vs
INFERCEPT vs vLLM on its datasets, the mechanism behind the gap, and a sweep of what the gain needs.

    python -m bench sim_lamps_paper [--profile a100-40gb-gptj-6b-measured] [--duration 1800]
        [--drain 0] [--rates "single=3,4,5,6;infercept=2,3,4,5;toolbench=2,3,4,5"] [--sweep-at single=5]
        [--no-sweep] [--quick] [--out sim_lamps_paper]

Every number is simulated (bench/studies/sim/sim_lamps.py's requests on one simulated vLLM instance driven by
teola's runtime in virtual time). The set-up, each part from the paper (../shared/papers/lamps.md) or
from the run scripts released with it and with INFERCEPT, or assumed (said so):
- model and GPU (§6.1): GPT-J 6B on an A100 limited to 40 GB: the profile `a100-40gb-gptj-6b-measured`
  (bench/studies/sim/sim_lamps_profile.py: Llama-2-7B's measured operators scaled to GPT-J's shape, DERIVED;
  KV pool 3,528 blocks, ASSUMED as in the datasheet-derived `a100-40gb-gptj-6b`); vLLM's defaults as both
  systems are built on vLLM 0.2: up to 256 sequences, admission bound by free KV blocks
  (bench/studies/sim/kv_admission.py), no prefix cache (vLLM 0.2 has none, so a discarded context is
  recomputed whole), max_model_len 2048;
- datasets (§6.1-6.2, Table 2): "single" = the INFERCEPT API types with one API call per request (the
  single-API subset; LAMPS' released run uses a one-API workload), "infercept" = the multi-API INFERCEPT
  dataset (Table 2's calls per request), "toolbench" = Table 2's ToolBench row. Neither dataset is
  available here: API durations and calls per request are Table 2's means and standard deviations
  (lognormal, ASSUMED shape); output and prompt lengths are ASSUMED (bench/studies/sim/sim_lamps.py's
  docstring), not the datasets' (the INFERCEPT dataset records them; ToolBench's are predicted in the paper);
- systems (§6.1 baselines): vLLM = FCFS with each API call ending the request (KV discarded, the call
  after the API queued as a new request at the back, its context recomputed: the `waiting.append` of
  INFERCEPT's and LAMPS' vLLM runs); INFERCEPT = FCFS by the request's arrival (vLLM's order of a
  sequence group, which a paused request keeps) with INFERCEPT's handling chosen at each pause from the
  call's context and the running batch's (its equations 1-3, the API type's mean duration);
  LAMPS = teola's `lamps` policy (handling predicted when queued, ranked by memory over time, starvation
  threshold 100 engine iterations counted once LAMPS has scheduled the request, §4.4); lengths given
  to LAMPS are the true ones (the INFERCEPT dataset records them; on ToolBench the paper predicts
  them, with 78% within 15 words);
- rates: the paper's text quotes 3 and 5 req/s (§6.2); LAMPS' released single-API run uses 3, 4, 5, 6;
  INFERCEPT's GPT-J runs 1-4; Fig. 7 fixes 5. Defaults: single 3-6, infercept 2-5, toolbench 2-5;
- measurement, as the papers' scripts run (--window 1800): Poisson arrivals for --duration seconds
  from an empty system; mean E2E of the requests that finished by the end of the run + --drain
  (requests still unfinished are counted and reported, not averaged: the paper-style number when a
  system is overloaded favours whoever finishes the short requests). Whether a point is at steady
  state (bench/sim_lamps_report.steady) is reported beside it.

Mechanism (where the paper's gap is largest, --sweep-at): per system the calls waiting, running, KV in
use, handlings and time in API calls come from the same runs; the sweep reruns INFERCEPT and LAMPS there
with half and double the KV pool, API durations x0.25 and x4, so the page says which property the gain
follows.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import statistics
import sys
import time
from typing import Any

from bench.lib.results import write_results
from bench.studies.sim import sim_lamps, sim_lamps_requests
from bench.studies.sim.sim_lamps_paper_page import PAPER, markdown

PROFILE = "a100-40gb-gptj-6b-measured"
SYSTEMS = {
    "vLLM": "vLLM",
    "INFERCEPT": "FCFS-request+INFERCEPT",
    "LAMPS": "LAMPS",
}  # page name -> sim_lamps system
DEFAULT_RATES = "single=3,4,5,6;infercept=2,3,4,5;toolbench=2,3,4,5"
SWEEP = {
    "KV pool x0.5": {"kv_scale": 0.5},
    "KV pool x2": {"kv_scale": 2.0},
    "API durations x0.25": {"api_scale": 0.25},
    "API durations x4": {"api_scale": 4.0},
    "request lengths x0.5": {"length_scale": 0.5},
    "segment lengths spread x2 (lognormal sigma 1.6)": {"sigma": 1.6},
    "LAMPS without starvation marks (threshold 10^9 iterations)": {"starvation": 10**9},
    "LAMPS counting starvation from a call's first sight (starvation_from='seen')": {
        "starvation_from": "seen"
    },
    "LAMPS ranking inside the engine too (its waiting queue, preemption)": {"engine_priority": True},
}


def setup_for(
    profile: str,
    kv_scale: float = 1.0,
    api_scale: float = 1.0,
    drain: float = 0.0,
    length_scale: float = 1.0,
    starvation: int | None = None,
    engine_priority: bool = False,
    sigma: float = 0.8,
    starvation_from: str | None = None,
) -> dict[str, Any]:
    """bench.studies.sim.sim_lamps' run set-up of the paper's engine (the module docstring)."""
    from engines.sim.profile import load_profile

    entry = load_profile(profile)["engines"]["vllm"]
    return {
        "cap": int(entry.get("max_num_seqs", 256)),
        "kv_blocks": max(1, round(int(entry["num_blocks"]) * kv_scale)),
        "kv_admission": True,
        "lamps_batch": None,
        "predictions": None,
        "prefix_caching": False,
        "drain": drain,
        "api_scale": api_scale,
        "length_scale": length_scale,
        "starvation": starvation,
        "starvation_from": starvation_from,
        "engine_priority": engine_priority,
        "sigma": sigma,
    }


def point(
    profile: str, mix: str, name: str, rate: float, duration: float, setup: dict[str, Any]
) -> dict[str, Any]:
    """One system at one rate: a fixed run of `duration` seconds of arrivals (sim_lamps.run_point)."""
    r = sim_lamps.run_point(profile, mix, SYSTEMS[name], rate, 0.0, duration, 0.0, setup=setup)
    r["system"] = name
    r["load"].pop("waiting_series", None)
    if not r["measured"] and r["load"]["overloaded_at"] is None:  # a fixed run that finished nothing
        r["load"]["overloaded_at"] = math.nan
    return r


def distributions(mix: str, n: int = 4000, max_len: int = 2048, length_scale: float = 1.0) -> dict[str, Any]:
    """What bench.studies.sim.sim_lamps draws for `mix` (n requests): per API type the durations' and calls'
    mean and std against Table 2's, and the tokens written per segment."""
    reqs = sim_lamps_requests.requests(mix, n, 1.0, max_len, 0, length_scale=length_scale)
    out: dict[str, Any] = {}
    for kind, ((d_mean, d_std), (k_mean, k_std)) in sim_lamps_requests.MIXES[mix].items():
        rows = [r for r in reqs if r["type"] == kind]
        apis = [a for r in rows for a in r["apis"]]
        calls = [len(r["apis"]) for r in rows]
        out[kind] = {
            "paper_duration": [d_mean, d_std],
            "duration": [statistics.fmean(apis), statistics.pstdev(apis)],
            "paper_calls": [k_mean, k_std],
            "calls": [statistics.fmean(calls), statistics.pstdev(calls)],
        }
    segs = [s for r in reqs for s in r["segments"]]
    words = [r["words"] for r in reqs]
    out["_lengths"] = {
        "segment_tokens": [statistics.fmean(segs), statistics.pstdev(segs)],
        "prompt_words": [statistics.fmean(words), statistics.pstdev(words)],
    }
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default=PROFILE, help=f"simulation profile (default {PROFILE})")
    p.add_argument(
        "--rates", default=DEFAULT_RATES, help=f"rates per dataset, req/s (default {DEFAULT_RATES})"
    )
    p.add_argument(
        "--duration",
        type=float,
        default=1800.0,
        help="seconds of Poisson arrivals per point (default 1800, the papers' --window)",
    )
    p.add_argument(
        "--drain",
        type=float,
        default=0.0,
        help="seconds after the arrivals end that finishing requests still count (default 0)",
    )
    p.add_argument("--systems", default=",".join(SYSTEMS), help=f"systems (default {','.join(SYSTEMS)})")
    p.add_argument(
        "--sweep-at",
        default="single=5",
        help="dataset=rate of the mechanism tables and the sweep "
        "(default single=5, the paper's largest gap against INFERCEPT)",
    )
    p.add_argument("--no-sweep", action="store_true", help="skip the KV / API-duration sweep")
    p.add_argument(
        "--length-scale",
        type=float,
        default=1.0,
        help="prompt words and segment tokens x this (default 1: bench/studies/sim/sim_lamps.py's assumed "
        "lengths)",
    )
    p.add_argument(
        "--quick", action="store_true", help="single-API at 3 and 5 req/s, 300 s, no sweep (a smoke run)"
    )
    p.add_argument("--out", default="sim_lamps_paper")


def sweep(
    args: argparse.Namespace, rows: list[dict[str, Any]], mix: str, rate: float, duration: float
) -> list[dict[str, Any]]:
    """INFERCEPT and LAMPS at `mix` and `rate` as run (their `rows` there, run again if missing) and with
    each SWEEP variant's property changed."""
    out = []
    for variant, change_by in {"as run": {}, **SWEEP}.items():
        for name in ("INFERCEPT", "LAMPS"):
            if not change_by:
                found = [r for r in rows if r["rate"] == rate and r["system"] == name]
                if found:
                    out.append({**found[0], "variant": variant})
                    continue
            varied = {**change_by, "length_scale": args.length_scale * change_by.get("length_scale", 1.0)}
            r = point(
                args.profile, mix, name, rate, duration, setup_for(args.profile, drain=args.drain, **varied)
            )
            out.append({**r, "variant": variant})
            print(
                f"[sim_lamps_paper] sweep {variant} {name}: mean {r['mean_s']:.1f} s finished "
                f"{r['measured']}",
                file=sys.stderr,
                flush=True,
            )
    return out


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    rates = {"single": (3.0, 5.0)} if args.quick else sim_lamps.parse_rates(args.rates)
    duration = 300.0 if args.quick else args.duration
    systems = [s for s in args.systems.split(",") if s]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise SystemExit(f"--systems: unknown {unknown} (known: {', '.join(SYSTEMS)})")
    mix_at, _, rate_at = args.sweep_at.partition("=")
    setup = setup_for(args.profile, drain=args.drain, length_scale=args.length_scale)
    t0 = time.perf_counter()
    data: dict[str, Any] = {
        "profile": args.profile,
        "duration": duration,
        "drain": args.drain,
        "setup": setup,
        "paper": {f"{m}@{r:g}": v for (m, r), v in PAPER.items()},
        "mixes": {},
    }
    for mix, mix_rates in rates.items():
        rows = data["mixes"][mix] = []
        for rate in mix_rates:
            for name in systems:
                rows.append(point(args.profile, mix, name, rate, duration, setup))
                r = rows[-1]
                print(
                    f"[sim_lamps_paper] {mix} {rate:g}/s {name}: mean {r['mean_s']:.1f} s finished "
                    f"{r['measured']} unfinished {r['unfinished']} waiting {r['load']['waiting']:.0f} kv "
                    f"{r['load']['kv_used']:.2f} ({r['wall_s']:.0f} s wall)",
                    file=sys.stderr,
                    flush=True,
                )
    if mix_at in rates and float(rate_at) in rates[mix_at]:
        data["mechanism"] = {"mix": mix_at, "rate": float(rate_at)}
    if not (args.quick or args.no_sweep):
        data["sweep"] = sweep(args, data["mixes"].get(mix_at, []), mix_at, float(rate_at), duration)
    data["distributions"] = {mix: distributions(mix, length_scale=args.length_scale) for mix in rates}
    data["wall_s"] = time.perf_counter() - t0
    data["nice"] = os.nice(0)
    data["command"] = "python -m bench sim_lamps_paper " + shlex.join(argv)
    write_results(args.out, data, markdown(data), subject="sim")
    return 0


if __name__ == "__main__":
    raise SystemExit("run: python -m bench sim_lamps_paper (docs/simulator.md)")
