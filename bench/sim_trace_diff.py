"""Where the simulator's time differs from the real engines', primitive by primitive (issue 17).

    python -m bench.sim_trace_diff --profile cpu-smollm2-135m [--n 3]

The same queries (bench.rag's TruthfulQA-over-BoolQ set, seed 0) run one at a time, prefix cache
emptied before each, with teola's config: first on the real engines (recording the LLM's output
lengths), then on the profile's simulated engines in virtual time with exactly those lengths. Per
app and primitive: mean time queued and running, measured vs simulated; per query: time before the
first primitive is queued (compilation, planning) and after the last finishes (result assembly),
which the simulator does not charge.
"""
from __future__ import annotations

import argparse
import asyncio
import copy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import write_results
from bench.rag import SYSTEMS, make_apps, reset_prefix_cache
from bench.sim_fidelity import on_simulated_apps
from bench.workloads import app_query, doc_qa_queries
from teola.sim.profiler import add_lengths

NAMES = ("naive_rag", "advanced_rag")


async def run_queries(apps: dict[str, Any], queries: list[dict[str, Any]], real: bool) -> dict[str, Any]:
    config, policy = SYSTEMS["teola"]
    out: dict[str, Any] = {}
    for name, app in apps.items():
        app.runtime.set_policy(policy)
        rows = out[name] = []
        for q in queries:
            if real:
                await reset_prefix_cache(app)
            else:
                for inst in app.runtime.instances["llm"]:
                    inst.handle.reset_prefix_cache()
            r = await app.run(app_query(q), {**config, "policy": policy, "timeout": 600})
            rows.append({"latency": r.latency, "trace": r.trace})
    return out


async def real_side(queries: list[dict[str, Any]]) -> dict[str, Any]:
    apps = make_apps(NAMES)
    for app in apps.values():
        await app.start()
    try:
        return await run_queries(apps, queries, real=True)
    finally:
        for app in apps.values():
            await app.stop()


def sim_side(queries: list[dict[str, Any]], profile: dict[str, Any]) -> dict[str, Any]:
    return on_simulated_apps(NAMES, profile, lambda apps: run_queries(apps, queries, real=False))


def _queued(t: dict[str, Any]) -> float:
    """When a primitive was queued (0.0 is a time, not a missing one)."""
    return t["started"] if t.get("queued") is None else t["queued"]


def per_primitive(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    acc: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        for t in run["trace"]:
            if t.get("started") is None or t.get("finished") is None:
                continue
            a = acc.setdefault(t["primitive"], {"queued": [], "running": [], "engine": t.get("engine") or "-"})
            a["queued"].append(t["started"] - _queued(t))
            a["running"].append(t["finished"] - t["started"])
    return {k: {"engine": v["engine"], "queued": statistics.fmean(v["queued"]), "running": statistics.fmean(v["running"])}
            for k, v in acc.items()}


def edges(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Mean seconds before the first primitive is queued and after the last one finishes."""
    before, after = [], []
    for run in runs:
        done = [t for t in run["trace"] if t.get("finished") is not None]
        if not done:
            continue
        before.append(min(_queued(t) for t in done))
        after.append(run["latency"] - max(t["finished"] for t in done))
    return {"before": statistics.fmean(before), "after": statistics.fmean(after),
            "latency": statistics.fmean(r["latency"] for r in runs)}


def markdown(d: dict[str, Any]) -> str:
    lines = ["## Simulator vs real engines, primitive by primitive (issue 17)", "",
             f"Command: `{d['command']}` ({d['wall_s'] / 60:.1f} min). {d['n']} queries per app, one at a time, teola's "
             "config, prefix cache emptied before each; the simulation replays the real run's output lengths. "
             "Seconds are means per query.", ""]
    for name in NAMES:
        real, sim = d["real"][name], d["sim"][name]
        er, es = edges(real), edges(sim)
        lines += [f"**{name}**: latency measured {er['latency']:.2f} s, simulated {es['latency']:.2f} s "
                  f"({(es['latency'] - er['latency']) / er['latency']:+.0%}); before the first primitive "
                  f"{er['before'] * 1e3:.0f} vs {es['before'] * 1e3:.0f} ms; after the last "
                  f"{er['after'] * 1e3:.0f} vs {es['after'] * 1e3:.0f} ms.", "",
                  "| primitive | engine | queued real / sim (s) | running real (s) | running sim (s) | error |",
                  "|---|---|---:|---:|---:|---:|"]
        pr, ps = per_primitive(real), per_primitive(sim)
        for prim, r in sorted(pr.items(), key=lambda kv: -kv[1]["running"]):
            s = ps.get(prim)
            if s is None:
                continue
            err = (s["running"] - r["running"]) / r["running"] if r["running"] > 0 else 0.0
            lines.append(f"| {prim} | {r['engine']} | {r['queued']:.3f} / {s['queued']:.3f} | {r['running']:.3f} | "
                         f"{s['running']:.3f} | {err:+.0%} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.sim_trace_diff", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--profile", default="cpu-smollm2-135m")
    p.add_argument("--n", type=int, default=3)
    args = p.parse_args(argv)
    from engines.sim_profile import load_profile
    profile = copy.deepcopy(load_profile(args.profile))
    queries = doc_qa_queries(args.n, 10, "truthfulqa", 0)
    t0 = time.perf_counter()
    real = asyncio.run(real_side(queries))
    lengths: dict[str, list[int]] = {"text": [], "split": []}
    for runs in real.values():
        for run in runs:
            add_lengths(lengths, run["trace"])
    profile["engines"]["vllm"]["lengths"] = {k: sorted(v) for k, v in lengths.items() if v}
    sim = sim_side(queries, profile)
    strip = lambda side: {k: [{"latency": r["latency"], "trace": r["trace"]} for r in v] for k, v in side.items()}
    data = {"real": strip(real), "sim": strip(sim), "n": args.n, "profile": args.profile,
            "wall_s": time.perf_counter() - t0,
            "command": "python -m bench.sim_trace_diff " + " ".join(argv if argv is not None else sys.argv[1:])}
    write_results("sim_trace_diff", data, markdown(data))
    print(markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
