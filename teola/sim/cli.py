"""The simulator's commands: `teola profile` and `teola simulate` (registered by teola.cli).

teola profile [APP] [--out FILE] [--queries N] [--quick] [--repeats N]
teola profile --from-measured [DIR] --gpu a100 --model Llama-2-7b-hf [--tp 1] [--base PROFILE] [--out FILE]
teola simulate APP --profile NAME --rate R[,R2,...] --queries N [--instances llm=4,embedding=2]
               [--policy atlas] [--passes '{"prefill_split": false}'] [--seed S] [--json] [--plot FILE.png]
teola simulate APP --profile NAME --trace FILE.csv[.gz] [--queries N]   # arrivals and lengths of a trace
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from engines.sim.profile import PROFILE_DIR, profile_names
from teola.server.loading import resolve_app

MEASURED_ENV = "TEOLA_GPU_MEASURED"


class SimCliError(Exception):
    """A usage mistake: printed by teola.cli as an error with exit code 2."""


def _say(message: str) -> None:
    print(f"[teola] {message}", file=sys.stderr, flush=True)


def parse_instances(text: str | None) -> dict[str, int]:
    """ "llm=4,embedding=2" -> {"llm": 4, "embedding": 2}."""
    out: dict[str, int] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, _, count = part.partition("=")
        if not name.strip() or not count.strip().isdigit() or int(count) < 1:
            raise SimCliError(f"--instances takes engine=count pairs such as llm=4,embedding=2; got {part!r}")
        out[name.strip()] = int(count)
    return out


def parse_rates(text: str) -> list[float]:
    """ "0.5,1,2" -> [0.5, 1.0, 2.0] (each > 0)."""
    try:
        rates = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise SimCliError(
            f"--rate takes queries/s, one number or several separated by commas; got {text!r}"
        ) from None
    if not rates or any(not r > 0 for r in rates):
        raise SimCliError(f"--rate values must be > 0 queries/s; got {text!r}")
    return rates


def cmd_simulate(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from teola.sim.run import simulate

    config: dict[str, Any] = {}
    if args.policy:
        config["policy"] = args.policy
    if args.passes:
        try:
            config["passes"] = json.loads(args.passes)
        except json.JSONDecodeError as e:
            raise SimCliError(f"--passes must be JSON such as '{{\"prefill_split\": false}}' ({e})") from None
    if args.plot and not str(args.plot).lower().endswith(".png"):
        raise SimCliError(f"--plot writes a PNG; give a file name ending in .png, got {args.plot!r}")
    if args.trace:
        return _simulate_trace(args, config)
    rates, reports = parse_rates(args.rate), []
    for rate in rates:
        with tqdm(
            total=args.queries,
            desc=f"simulating {rate:g} q/s",
            unit="query",
            disable=args.json,
            leave=False,
            file=sys.stderr,
        ) as bar:
            try:
                report = simulate(
                    resolve_app(args.app),
                    args.profile,
                    rate,
                    args.queries,
                    parse_instances(args.instances),
                    config,
                    seed=args.seed,
                    on_query=lambda: bar.update(1),
                )
            except ValueError as e:
                raise SimCliError(str(e)) from None
        reports.append(report)
        print(json.dumps(report.summary(), indent=2) if args.json else report.table(), flush=True)
    if args.plot:
        from teola.sim.plots import plot_reports

        _say(f"wrote {plot_reports(reports, args.plot)}")
    return 0 if all(r.failed == 0 for r in reports) else 1


def _simulate_trace(args: argparse.Namespace, config: dict[str, Any]) -> int:
    """`teola simulate APP --trace FILE`: the trace's arrivals and lengths instead of Poisson ones."""
    from teola.sim.run import query_variants, simulate
    from teola.sim.trace_workload import read_trace, trace_rate, use_trace

    try:
        requests = read_trace(args.trace, args.queries)
        app = resolve_app(args.app)
        report = simulate(
            app,
            args.profile,
            trace_rate(requests),
            query_variants(app.sample()[0], len(requests)),
            parse_instances(args.instances),
            config,
            seed=args.seed,
            arrivals=[r.arrived_at for r in requests],
            on_start=lambda a: use_trace(a, requests),
        )
    except ValueError as e:
        raise SimCliError(str(e)) from None
    report.arrivals = f"trace {Path(args.trace).name}"
    print(json.dumps(report.summary(), indent=2) if args.json else report.table(), flush=True)
    return 0 if report.failed == 0 else 1


def cmd_profile(args: argparse.Namespace) -> int:
    if args.from_measured is not None:
        return cmd_profile_measured(args)
    from teola.sim.profiler import profile_app

    if args.repeats < 1:
        print(f"teola profile: --repeats must be >= 1, got {args.repeats}", file=sys.stderr)
        return 2
    app = resolve_app(args.app)
    out = Path(args.out) if args.out else PROFILE_DIR / f"measured-{app.name}.json"
    name = out.stem
    _say(f"profiling the engines of {app.name!r} (starts them; {'~2' if args.quick else '~5'} min) -> {out}")
    profile = asyncio.run(
        profile_app(app, name, _say, queries=args.queries, quick=args.quick, repeats=args.repeats)
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(profile, indent=1) + "\n", encoding="utf-8")
    for kind, entry in profile["engines"].items():
        fit = entry["fit"]
        reports = [fit] if "samples" in fit else list(fit.values())
        print(f"{kind}: mean abs fit error {max(r['mean_abs_error'] for r in reports):.1%}")
    for kind, others in profile.get("device", {}).get("slowdown", {}).items():
        print(f"{kind}: " + ", ".join(f"x{f:.2f} while {o} computes" for o, f in others.items()))
    print(f"wrote {out} (use it with: teola simulate {args.app} --profile {out})")
    return 0


def cmd_profile_measured(args: argparse.Namespace) -> int:
    """`teola profile --from-measured [DIR]`: a GPU profile from measured operator tables, no engine."""
    from engines.sim.profile import load_profile
    from teola.sim.gpu_profile import build_gpu_profile

    data_dir = args.from_measured or os.environ.get(MEASURED_ENV)
    if not data_dir:
        raise SimCliError(
            f"--from-measured needs the folder of the measured GPU tables, on the command line "
            f"or in ${MEASURED_ENV}"
        )
    try:
        base = load_profile(args.base) if args.base else None
        profile = build_gpu_profile(
            data_dir,
            args.gpu,
            args.model,
            args.tp,
            base=base,
            topology=args.topology,
            layers=args.layers,
            name=Path(args.out).stem if args.out else None,
        )
    except ValueError as e:
        raise SimCliError(str(e)) from None
    out = Path(args.out) if args.out else PROFILE_DIR / f"{profile['name']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(profile, indent=1) + "\n", encoding="utf-8")
    cost = profile["engines"]["vllm"]["cost"]
    table = dict((int(n), s) for n, s in cost["token_table"])
    print(
        f"{args.model} on {args.gpu} at tp={args.tp}: iteration of 1 token {table[1] * 1e3:.2f} ms, "
        f"of {max(table)} tokens {table[max(table)] * 1e3:.1f} ms (linear layers"
        f"{' + all-reduces' if args.tp > 1 else ''}); base {cost['base'] * 1e3:.2f} ms"
    )
    print(f"wrote {out} (use it with: teola simulate <app> --profile {out})")
    return 0


def add_commands(sub: Any, apps_help: str) -> None:
    """Register `simulate` and `profile` on teola's sub-command parser."""
    _add_simulate(sub, apps_help)
    _add_profile(sub, apps_help)


def _add_simulate(sub: Any, apps_help: str) -> None:
    """`teola simulate`: an app on simulated engines in virtual time, at one or more rates or a trace."""
    sp = sub.add_parser(
        "simulate", help="serve an app on simulated engines in virtual time (no engine starts)"
    )
    sp.add_argument("app", help=apps_help)
    sp.add_argument(
        "--profile",
        required=True,
        help=f"a profile file, or a shipped one ({', '.join(profile_names()) or 'none yet'})",
    )
    sp.add_argument(
        "--rate",
        default="1",
        help="Poisson arrival rate, queries/s; several separated by commas "
        "(0.5,1,2) run one simulation each (default 1)",
    )
    sp.add_argument(
        "--queries",
        type=int,
        default=100,
        help="how many queries (default 100; with --trace its first N rows)",
    )
    sp.add_argument(
        "--trace",
        help="a request trace CSV (.csv or .csv.gz: arrived_at, num_prefill_tokens, "
        "num_decode_tokens, e.g. the Azure traces): its arrivals and each query's LLM lengths "
        "instead of Poisson arrivals (--rate is then ignored)",
    )
    sp.add_argument("--instances", help="engine instances, e.g. llm=4,embedding=2 (default: the app's)")
    sp.add_argument(
        "--policy",
        help="engine scheduling policy (fifo, po, to, topology, fcfs, mlfq, plas, atlas, lamps, sjf)",
    )
    sp.add_argument("--passes", help="pass switches as JSON, e.g. '{\"prefill_split\": false}'")
    sp.add_argument("--seed", type=int, default=0, help="arrival-time seed (default 0)")
    sp.add_argument("--json", action="store_true", help="print the summary as JSON")
    sp.add_argument("--plot", help="also write latency vs rate and the per-engine breakdown to this PNG")
    sp.set_defaults(handler=cmd_simulate)


def _add_profile(sub: Any, apps_help: str) -> None:
    """`teola profile`: this machine's engines measured, or a GPU profile built from measured tables."""
    sp = sub.add_parser(
        "profile", help="measure this machine's engines and fit a simulation profile (~5 min)"
    )
    sp.add_argument("app", nargs="?", default="advanced_rag", help=apps_help + " (default advanced_rag)")
    sp.add_argument("--out", help=f"profile file to write (default {PROFILE_DIR}/measured-<app>.json)")
    sp.add_argument("--queries", type=int, default=4, help="sample queries whose output lengths are recorded")
    sp.add_argument("--quick", action="store_true", help="fewer measurements (~2 min)")
    sp.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="rounds timing every LLM decoding batch once, each round after the first in a new "
        "shuffled order; each batch keeps its median (default 1; 3 steadies the per-step "
        "decode cost on a noisy machine, about 2x the LLM part)",
    )
    sp.add_argument(
        "--from-measured",
        nargs="?",
        const="",
        metavar="DIR",
        help="build a GPU profile from measured operator tables instead of measuring engines: DIR "
        f"holds compute__*.csv.gz and network__*.csv.gz (default ${MEASURED_ENV}); starts nothing",
    )
    sp.add_argument("--gpu", default="a100", help="with --from-measured: GPU type of the tables (a100, h100)")
    sp.add_argument(
        "--model",
        default="Llama-2-7b-hf",
        help="with --from-measured: model of the tables (Llama-2-7b-hf, Meta-Llama-3-8B, Llama-2-70b-hf)",
    )
    sp.add_argument(
        "--tp", type=int, default=1, help="with --from-measured: tensor-parallel degree (default 1)"
    )
    sp.add_argument(
        "--topology", default="dgx", help="with --from-measured: all-reduce table (dgx, pairwise_nvlink)"
    )
    sp.add_argument(
        "--layers", type=int, help="with --from-measured: layer count of a model not known by name"
    )
    sp.add_argument(
        "--base",
        help="with --from-measured: profile whose other engines and vLLM settings to keep "
        "(e.g. a100-llama2-7b)",
    )
    sp.set_defaults(handler=cmd_profile)
