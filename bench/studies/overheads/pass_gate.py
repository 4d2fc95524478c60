"""Cost-gated passes, predicted against measured: for each pass that adds a request or a stream
(prefill_split, decode_pipelining), the gain its cost model predicts from the LLM engine's costs (fitted
at start by the engine's probe, or a named profile) beside the measured effect of the pass, on against
off at equal work (issue 70 item 3).

Per app (naive RAG, advanced RAG with its expansion kept, the tool agent), in process on this machine:
the engines start (the LLM fits its costs), one warm-up query, then each query runs once unmeasured
(its prompts enter the prefix cache) and then with the pass forced on (`{"gate": false}`) and off,
alternating which goes first, each alone. The prediction is
read back from the e-graph of the same query compiled with the gate on (its `# gate` lines: one per
call, gain in ms, whether the gate applies the pass). Effect = latency off - latency on (positive:
the pass saves time); LLM work (prompt, output tokens, requests) is reported per side so unequal
work shows.

    python -m bench pass_gate                      # 3 queries per app, real engines
    python -m bench pass_gate --quick --simulate cpu-smollm2-135m   # 1 query per app, SIMULATED
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
from typing import Any

from bench.lib.llm_work import llm_calls
from bench.lib.results import command_line, machine, write_results
from bench.lib.workloads import app_query, narrative_qa_queries, tool_queries
from bench.studies.overheads.pass_gate_report import markdown

PASSES = ("prefill_split", "decode_pipelining")
APPS = ("naive_rag", "advanced_rag", "tool_agent")
SIM_APPS = APPS[:2]  # the shipped profiles model no tool engine
# the advanced app at equal work keeps its expansion (the default prunes it on these documents)
BASE_PASSES: dict[str, dict[str, Any]] = {"advanced_rag": {"prune_covered_searches": False}}
GATE_LINE = re.compile(
    r"^# gate (\w+) (\S+): (pipelined|split|kept whole), predicted gain ([+-]\d+) ms "
    r"\(([^)]*)\)(?:; (.*))?$"
)
UNUSED_LINE = re.compile(r"^# gate (\w+) (\S+): kept whole, costs not used \((.*)\)$")  # a poor fit


def gates(text: str, pass_name: str) -> list[dict[str, Any]]:
    """The `# gate` lines of one pass in an e-graph's text: call, applied, predicted gain (s), costs."""
    out = []
    for line in text.splitlines():
        if (m := GATE_LINE.match(line)) and m.group(1) == pass_name:
            out.append(
                {
                    "call": m.group(2),
                    "applies": m.group(3) != "kept whole",
                    "gain_s": int(m.group(4)) / 1e3,
                    "costs": m.group(5),
                    "note": m.group(6) or "",
                }
            )
        elif (m := UNUSED_LINE.match(line)) and m.group(1) == pass_name:
            out.append(
                {
                    "call": m.group(2),
                    "applies": False,
                    "gain_s": 0.0,
                    "costs": m.group(3),
                    "note": "costs not used",
                }
            )
    return out


def config(app: str, pass_name: str, on: bool | dict[str, Any]) -> dict[str, Any]:
    return {"passes": {**BASE_PASSES.get(app, {}), pass_name: on}}


def work(trace: list[dict[str, Any]]) -> dict[str, int]:
    """LLM work of one query: prompt and output tokens of its calls (a call's prefill and its split
    decode's items count once: bench.lib.llm_work), engine requests of its LLM primitives."""
    calls = llm_calls(trace)
    return {
        "prompt_tokens": sum(prompt for prompt, _ in calls),
        "output_tokens": sum(out for _, out in calls),
        "llm_requests": sum(
            int(t.get("requests") or 0) for t in trace if t.get("num_prompt_tokens") is not None
        ),
    }


def queries(app: str, n: int, seed: int) -> list[dict[str, Any]]:
    """n + 1 queries (the first a warm-up): NarrativeQA over its story and 2 others, or tool questions."""
    if app == "tool_agent":
        return tool_queries(n + 1, seed=seed)
    return [app_query(q) for q in narrative_qa_queries(n + 1, distractors=2, seed=seed)]


async def measure_pass(
    app: Any, name: str, pass_name: str, q: dict[str, Any], first_on: bool, profile: str | None
) -> dict[str, Any]:
    """One query with `pass_name` on and off (in the order given) and its predicted gain."""
    gate_opts: dict[str, Any] = {"profile": profile} if profile else {}
    predicted = gates(app.compile(q, config(name, pass_name, gate_opts)).egraph.to_text(), pass_name)
    row: dict[str, Any] = {
        "gates": predicted,
        "predicted_s": sum(g["gain_s"] for g in predicted),
        "gate_applies": any(g["applies"] for g in predicted),
    }
    for on in (True, False) if first_on else (False, True):
        r = await app.run(q, config(name, pass_name, {"gate": False} if on else False))
        side = "on" if on else "off"
        row[side] = {"latency": r.latency, **work(r.trace)}
    row["effect_s"] = row["off"]["latency"] - row["on"]["latency"]
    return row


async def measure_app(app: Any, name: str, n: int, seed: int, profile: str | None) -> dict[str, Any]:
    """Start the app's engines, warm up, and measure every pass on its queries (the app is stopped)."""
    qs = queries(name, n, seed)
    await app.start()
    try:
        llm = app.engines["llm"]
        costs = llm.costs.as_dict() if llm.costs is not None else None
        await app.run(qs[0], config(name, PASSES[0], False))  # warm-up, not counted
        rows: dict[str, list[dict[str, Any]]] = {p: [] for p in PASSES}
        for i, q in enumerate(qs[1:]):
            # primed: the query's prompts are in the prefix cache before either side runs, so the
            # side that runs first does not pay their prefill alone
            await app.run(q, config(name, PASSES[0], False))
            for pass_name in PASSES:
                row = await measure_pass(app, name, pass_name, q, i % 2 == 0, profile)
                rows[pass_name].append(row)
                print(
                    f"[pass_gate] {name} / {pass_name}: predicted {row['predicted_s']:+.3f} s, "
                    f"measured {row['effect_s']:+.3f} s",
                    flush=True,
                )
    finally:
        await app.stop()
    return {"costs": costs, "passes": rows}


def build(name: str) -> Any:
    import importlib

    return importlib.import_module(f"apps.{name}").build()


def run_real(apps: tuple[str, ...], n: int, seed: int, profile: str | None) -> dict[str, Any]:
    """Each app on the real engines, one after another (one vLLM process at a time)."""
    return {name: asyncio.run(measure_app(build(name), name, n, seed, profile)) for name in apps}


def run_simulated(apps: tuple[str, ...], n: int, seed: int, sim_profile: str) -> dict[str, Any]:
    """Each app on `sim_profile`'s simulated engines in virtual time, predicted with the same profile."""
    from teola.sim.run import use_profile
    from teola.sim.virtual_loop import run_virtual

    out = {}
    for name in apps:
        app = build(name)
        use_profile(app, sim_profile)
        out[name] = run_virtual(measure_app(app, name, n, seed, sim_profile))
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean predicted and measured effect of one pass on one app, and how often their signs agree."""
    agree = sum((r["predicted_s"] > 0) == (r["effect_s"] > 0) for r in rows)
    return {
        "n": len(rows),
        "predicted_s": statistics.fmean(r["predicted_s"] for r in rows),
        "effect_s": statistics.fmean(r["effect_s"] for r in rows),
        "sign_agrees": agree,
        "gate_applies": sum(r["gate_applies"] for r in rows),
        "on_latency": statistics.fmean(r["on"]["latency"] for r in rows),
        "off_latency": statistics.fmean(r["off"]["latency"] for r in rows),
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench pass_gate`."""
    p.add_argument("--quick", action="store_true", help="1 query per app")
    p.add_argument("--queries", type=int, default=3, help="queries per app (default 3)")
    p.add_argument(
        "--apps",
        default=None,
        help=f"comma-separated among {', '.join(APPS)} (default all; simulated: {', '.join(SIM_APPS)})",
    )
    p.add_argument(
        "--profile", default=None, help="predict with this profile instead of the engines' fitted costs"
    )
    p.add_argument(
        "--simulate",
        default=None,
        metavar="PROFILE",
        help="run on this profile's simulated engines in virtual time (SIMULATED; predicts with it)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="pass_gate", help="page name under bench/results/overheads/")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench pass_gate` (argv: the options given, for its page)."""
    apps = tuple(a for a in args.apps.split(",") if a) if args.apps else SIM_APPS if args.simulate else APPS
    if not apps or set(apps) - set(APPS):
        p.error(f"--apps: choose among {', '.join(APPS)}")
    n = 1 if args.quick else args.queries
    if args.simulate:
        results = run_simulated(apps, n, args.seed, args.simulate)
    else:
        from engines.assets.paths import configure_engine_env

        configure_engine_env()
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        results = run_real(apps, n, args.seed, args.profile)
    summaries = {a: {pn: summary(rows) for pn, rows in r["passes"].items()} for a, r in results.items()}
    command = command_line(
        "python -m bench pass_gate",
        (
            ("--quick", args.quick),
            ("--queries", None if args.quick else args.queries if args.queries != 3 else None),
            ("--apps", args.apps),
            ("--profile", args.profile),
            ("--simulate", args.simulate),
            ("--out", None if args.out == "pass_gate" else args.out),
        ),
    )
    data = {
        "machine": machine(),
        "simulated": bool(args.simulate),
        "apps": results,
        "summaries": summaries,
        "command": command,
    }
    write_results(
        args.out, {k: v for k, v in data.items() if k != "machine"}, markdown(data), subject="overheads"
    )
    return 0
