"""Deployment benchmarks (issue 70): teola vs LangGraph vs LlamaIndex at equal work with the LLM on an
emulated GPU vLLM server (`teola emulate`), everything else measured on this machine's CPUs.

Workloads (shipped data, fixed seeds): advanced and naive RAG over NarrativeQA stories ("small": the
gold story and 2 others, ~9 chunks; "large": and 28 others, ~100 chunks), the tool agent and
search-augmented generation (bench.studies.remote.remote_apps' apps, prompts and loopback search/tool
services). Systems and equal work: bench/studies/remote/deploy_systems.py (each system has its own emulator
process with the same profile, so prefix caches are not shared; one prompt text per call; every call writes
exactly its max_tokens).

Schedule, per workload: a warm-up query per system (not measured), then per trial k (seed + k: its
queries and Poisson arrivals) every system alone on the first `alone` queries, one after another, and
every system on an open-loop Poisson trace of `queries` queries at each rate; the systems' order
rotates per trial and per rate (interleaved: ABC, BCA, CAB). The rates are `fractions` of LangGraph's
service rate alone (1 / its mean latency alone in trial 0), the same for every system and trial.
Each run records the emulator's counters (requests, prompt and generated tokens) and the load average.
bench/studies/remote/deploy_report.py computes the ratios (baseline mean / teola mean) with bootstrap 95%
intervals over queries, the per-stage busy time and the equal-work checks.

Run: python -m bench deploy [--quick] [--workloads W,...] [--profile P] [--trials N] [--alone N]
[--queries N] [--fractions F,...]. Writes bench/results/remote/deploy_<profile>.{json,md}
(--quick: bench/results/remote/quick/; --out NAME to name them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench.studies.remote.deploy_emulator import METRICS, Emulator
from bench.studies.remote.deploy_systems import MODEL, RAG_APPS, baseline_one, make_baseline, teola_one

PROFILE = "a100-llama3.1-8b-measured"
SYSTEMS = ("teola", "LangGraph", "LlamaIndex")
WORKLOADS: dict[str, tuple[str, int | None]] = {  # name -> (app, distractor stories for RAG)
    "advanced_rag/small": ("advanced_rag", 2),
    "advanced_rag/large": ("advanced_rag", 28),
    "naive_rag/small": ("naive_rag", 2),
    "naive_rag/large": ("naive_rag", 28),
    "tool_agent": ("tool_agent", None),
    "search_generation": ("search_generation", None),
}
FRACTIONS = (1.0, 2.0, 4.0, 8.0)
# --passes-off NAME,...: teola with that default pass off runs beside it as "teola, NAME off", on
# teola's app and server (what the pass does at equal work, measured side by side)
VARIANT = "teola, {} off"


@dataclass
class Settings:
    workloads: tuple[str, ...] = tuple(WORKLOADS)
    systems: tuple[str, ...] = SYSTEMS
    passes_off: tuple[str, ...] = ()
    profile: str = PROFILE
    trials: int = 3
    alone: int = 3
    queries: int = 6
    fractions: tuple[float, ...] = FRACTIONS
    seed: int = 0

    @classmethod
    def quick(cls) -> Settings:
        return cls(workloads=("advanced_rag/small",), trials=1, alone=2, queries=3, fractions=(1.0,))


# ---- apps and queries -----------------------------------------------------------------------------
def make_apps(names: set[str], url: str, services: Any) -> dict[str, Any]:
    """The shipped apps with their LLM on the emulator at `url`, sharing one adapter per engine."""
    import importlib

    from bench.lib.remote_services import tool_specs
    from bench.studies.remote import remote_apps_setup as ra
    from teola.api.shared_engines import share_engines

    llm = {"kind": "openai", "url": url, "model": MODEL}
    apps = {}
    for name in sorted(names):
        if name in RAG_APPS:
            apps[name] = importlib.import_module(f"apps.{name}").build(llm=llm)
        elif name == "search_generation":
            from apps import search_generation

            apps[name] = search_generation.build(llm=llm, search={"url": services.search_url})
        else:
            from apps import tool_agent

            apps[name] = tool_agent.build(
                llm=llm,
                tools={"defaults": False, "http_tools": tool_specs(services.base_url)},
                tool_names=ra.TOOL_NAMES,
                max_calls=ra.MAX_CALLS,
                plan_instruction=ra.PLAN_INSTRUCTION,
                plan_examples=ra.PLAN_EXAMPLES,
            )
    share_engines(apps.values())
    return apps


def workload_queries(workload: str, n: int, seed: int) -> list[dict[str, Any]]:
    from bench.lib.workloads import narrative_qa_queries, search_queries
    from bench.studies.remote.remote_apps_setup import agent_queries

    app, distractors = WORKLOADS[workload]
    if app in RAG_APPS:
        return narrative_qa_queries(n, distractors or 0, seed)
    return search_queries(n, seed) if app == "search_generation" else agent_queries(n, seed)


def rotate(xs: tuple[str, ...], k: int) -> tuple[str, ...]:
    k %= len(xs)
    return xs[k:] + xs[:k]


# ---- runs -----------------------------------------------------------------------------------------
class Bench:
    """Every system over one set of started apps, each with its own emulator."""

    def __init__(
        self, apps: dict[str, Any], servers: dict[str, Emulator], llm_engines: dict[str, Any]
    ) -> None:
        self.apps, self.servers, self.llm_engines = apps, servers, llm_engines

    async def run(
        self, system: str, app: Any, impl: Any, queries: list[dict[str, Any]], arrivals: list[float] | None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        from bench.studies.rag.rag_runs import run_open_loop

        off = (
            {p: False for p in system.removeprefix("teola, ").removesuffix(" off").split(",")}
            if system.startswith("teola, ")
            else {}
        )

        def one(i: int, arrival: float) -> Any:
            if system.startswith("teola"):
                return teola_one(app, queries[i], arrival, i, off)
            return baseline_one(app, impl, queries[i], arrival, i)

        server = self.servers["teola" if system.startswith("teola") else system]
        before, t0, cpu0 = await server.counters(), time.perf_counter(), time.process_time()
        if arrivals is None:
            recs = [await one(i, 0.0) for i in range(len(queries))]
        else:
            recs = await run_open_loop(arrivals, lambda i: one(i, arrivals[i]))
        seconds, cpu, after = time.perf_counter() - t0, time.process_time() - cpu0, await server.counters()
        # cpu: this process's CPU seconds during the run (the client side: runtime or library, HTTP,
        # and the in-process embedder, reranker and pgvector client)
        run = {
            "seconds": seconds,
            "cpu": cpu,
            "loadavg": os.getloadavg(),
            "server": {k.split(":")[-1]: round(after[k] - before[k], 3) for k in METRICS},
        }
        return recs, run

    async def workload(self, name: str, s: Settings, progress: bool, done: Any = None) -> dict[str, Any]:
        """Every trial, point and system on one workload; `done(result)` after each trial."""
        from bench.lib.workloads import poisson_arrivals

        app = self.apps[WORKLOADS[name][0]]
        impls = {
            x: make_baseline(x, app, self.servers[x].url, self.llm_engines[x])
            for x in s.systems
            if x in SYSTEMS[1:]
        }
        systems = s.systems + tuple(VARIANT.format(off) for off in s.passes_off)
        reference = "LangGraph" if "LangGraph" in systems else systems[0]  # whose service rate sets the rates
        for system in systems:  # warm-up: first-call costs outside the numbers
            await self.run(system, app, impls.get(system), workload_queries(name, 1, s.seed + 1000), None)
        points: dict[str, Any] = {}
        rates: list[float] = []
        result = {
            "rates": rates,
            "points": points,
            "trials_done": 0,
            "settings": {k: getattr(s, k) for k in ("trials", "alone", "queries", "fractions", "passes_off")},
        }
        for k in range(s.trials):
            queries = workload_queries(name, max(s.alone, s.queries), s.seed + k)
            plan: list[tuple[str, float | None]] = [("alone", None)] + [
                (f"x{f:g}", None) for f in s.fractions
            ]
            for j, (point, _) in enumerate(plan):
                if point != "alone" and not rates:
                    base = statistics.fmean(
                        r["latency"] for r in points["alone"][reference]["records"] if r.get("ok")
                    )
                    rates += [f / base for f in s.fractions]
                lam = rates[j - 1] if j else None
                arrivals = poisson_arrivals(s.queries, lam, s.seed + k) if lam else None
                for system in rotate(rotate(systems, k), j):
                    recs, run = await self.run(
                        system,
                        app,
                        impls.get(system),
                        queries[: s.alone] if lam is None else queries[: s.queries],
                        arrivals,
                    )
                    entry = points.setdefault(point, {}).setdefault(
                        system, {"rate": lam, "records": [], "runs": []}
                    )
                    entry["records"] += [{**r, "trial": k} for r in recs]
                    entry["runs"].append({**run, "trial": k, "order": j})
                    if progress:
                        ok = [r["latency"] for r in recs if r.get("ok")]
                        print(
                            f"[deploy] {name} trial {k} {point} {system}: {len(ok)}/{len(recs)} ok, mean "
                            f"{statistics.fmean(ok) if ok else float('nan'):.2f} s, load "
                            f"{os.getloadavg()[0]:.1f}",
                            flush=True,
                        )
            result["trials_done"] = k + 1
            if done is not None:
                done(result)
        return result


async def start_systems(
    stack: Any, profile: str, systems: tuple[str, ...], names: set[str], seed: int
) -> tuple[dict[str, Emulator], dict[str, Any], dict[str, Any]]:
    """Started on `stack` (an AsyncExitStack): an emulated server per system, the loopback tool/search
    services when a workload needs them, teola's apps `names` (on teola's server, else the first) and
    each baseline's remote LLM engine. Returns (servers, apps, engines)."""
    from bench.lib.remote_services import ServiceProcess
    from engines.openai.llm import OpenAILLMEngine

    servers = {x: await stack.enter_async_context(Emulator(profile)) for x in dict.fromkeys(systems)}
    services = await stack.enter_async_context(ServiceProcess(seed=seed)) if names - set(RAG_APPS) else None
    apps = make_apps(names, servers.get("teola", next(iter(servers.values()))).url, services)
    engines = {
        x: OpenAILLMEngine(f"{x}-llm", url=servers[x].url, model=MODEL) for x in servers if x != "teola"
    }
    for a in apps.values():
        await a.start()
        stack.push_async_callback(a.stop)
    for e in engines.values():
        await e.start()
        stack.push_async_callback(e.stop)
    return servers, apps, engines


async def _main(s: Settings, progress: bool = True, write: Any = None) -> dict[str, Any]:
    import contextlib

    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    names = {WORKLOADS[w][0] for w in s.workloads}
    t0 = time.perf_counter()
    async with contextlib.AsyncExitStack() as stack:
        servers, apps, engines = await start_systems(stack, s.profile, ("teola", *s.systems), names, s.seed)
        startup = time.perf_counter() - t0
        bench = Bench(apps, servers, engines)
        out = {"settings": asdict(s), "startup_seconds": startup, "workloads": {}}
        for w in s.workloads:

            def done(
                result: dict[str, Any], w: str = w
            ) -> None:  # each finished trial is on the page at once
                out["workloads"][w] = result
                out["wall_seconds"] = time.perf_counter() - t0
                if write is not None:
                    write(out)

            out["workloads"][w] = await bench.workload(w, s, progress, done)
    out["wall_seconds"] = time.perf_counter() - t0
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench deploy`."""
    p.add_argument(
        "--quick",
        action="store_true",
        help="advanced RAG on small documents, 1 trial, 2 alone, 3 queries at one rate (test-sized)",
    )
    p.add_argument("--workloads", default=None, help=f"comma-separated subset of {','.join(WORKLOADS)}")
    p.add_argument(
        "--profile",
        default=None,
        help=f"the emulator's GPU profile (default {PROFILE}; `teola emulate --help` lists the shipped ones)",
    )
    p.add_argument("--trials", type=int, default=None, help="trials (default 3)")
    p.add_argument("--alone", type=int, default=None, help="queries alone per system and trial (default 3)")
    p.add_argument("--queries", type=int, default=None, help="queries per Poisson trace (default 6)")
    p.add_argument(
        "--fractions",
        default=None,
        help="rates as fractions of LangGraph's service rate alone (default 1,2,4,8)",
    )
    p.add_argument(
        "--systems", default=None, help=f"comma-separated subset of {','.join(SYSTEMS)} (teola always runs)"
    )
    p.add_argument(
        "--passes-off",
        default=None,
        help="comma-separated default passes: teola with each one off also runs, as 'teola, NAME off'",
    )
    p.add_argument(
        "--append",
        action="store_true",
        help="keep the other workloads already on the page (each workload's settings are on it)",
    )
    p.add_argument("--out", default=None, help="results name (default deploy_<profile>)")


def settings_from(args: argparse.Namespace, p: argparse.ArgumentParser) -> Settings:
    """The run's Settings from its options (p.error names a wrong one)."""
    s = Settings.quick() if args.quick else Settings()
    if args.workloads:
        s.workloads = tuple(w.strip() for w in args.workloads.split(",") if w.strip())
        if unknown := [w for w in s.workloads if w not in WORKLOADS]:
            p.error(f"unknown workload(s) {unknown}; known: {list(WORKLOADS)}")
    for flag in ("trials", "alone", "queries"):
        value = getattr(args, flag)
        if value is not None:
            if value < 1:
                p.error(f"--{flag} must be >= 1")
            setattr(s, flag, value)
    if args.fractions:
        from bench.studies.rag.doc_qa_options import positive_numbers

        s.fractions = positive_numbers(p, "--fractions", args.fractions)
    if args.profile:
        s.profile = args.profile
    if args.systems:
        s.systems = (
            "teola",
            *(x.strip() for x in args.systems.split(",") if x.strip() and x.strip() != "teola"),
        )
        if unknown := [x for x in s.systems if x not in SYSTEMS]:
            p.error(f"unknown system(s) {unknown}; known: {list(SYSTEMS)}")
    if args.passes_off:
        from teola.passes.registry import pass_names

        s.passes_off = tuple(x.strip() for x in args.passes_off.split(",") if x.strip())
        if unknown := sorted(set(s.passes_off) - set(pass_names())):
            p.error(f"unknown pass(es) {unknown}; known: {', '.join(pass_names())}")
    return s


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench deploy` (argv: the options given, for its page)."""
    from bench.lib.results import machine, results_dir, rounded, without_keys
    from bench.studies.remote.deploy_report import markdown

    s = settings_from(args, p)
    out = args.out or "deploy_" + s.profile.replace(".", "_").replace("-", "_")
    if not out.replace("_", "").isalnum():
        p.error(f"--out must be a plain name (letters, digits, _), got {out!r}")
    here = results_dir("remote")
    folder = here / "quick" if args.quick else here
    folder.mkdir(parents=True, exist_ok=True)
    facts = {
        "machine": machine(),
        "quick": args.quick,
        "command": " ".join(["python -m bench deploy", *argv]).strip(),
    }

    kept = {}
    if args.append and (folder / f"{out}.json").exists():  # the page's other workloads stay on it
        kept = json.loads((folder / f"{out}.json").read_text())["workloads"]

    def write(data: dict[str, Any]) -> None:
        data.update(facts)
        data["workloads"] = {
            **{w: r for w, r in kept.items() if w not in data["workloads"]},
            **data["workloads"],
        }
        # the emulator's filler answers dropped and timings kept to 0.1 ms: the page re-renders from it
        # to the same text, and a long run stays under the 200 KB cap of files under bench/
        stored = rounded(without_keys(data, "answer"))
        (folder / f"{out}.json").write_text(json.dumps(stored, separators=(",", ":"), default=str))
        (folder / f"{out}.md").write_text(markdown(stored).rstrip() + "\n")  # the page its JSON gives

    data = asyncio.run(_main(s, write=write))
    write(data)
    print(markdown(data))
    return 0
