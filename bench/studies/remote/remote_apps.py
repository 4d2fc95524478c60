"""Apps whose latency comes from remote services: teola vs LlamaIndex vs LangGraph, on real engines.

Workloads (issue 15; shipped data, fixed seeds):
- search_generation (Teola Fig. 2a, apps/search_generation.py): NQ-open questions; the judge LLM
  decides, the search goes to a loopback web-search service over the shipped Wikipedia corpus whose
  answers are delayed by Tavily's published latency distribution (bench/lib/remote_services.py says
  the source), the core LLM answers from the top 4 results;
- tool_agent (Fig. 2b, apps/tool_agent.py): questions that each need a tool (a city's weather or
  a unit conversion: the tools SmolLM2-135M calls correctly, see PLAN_EXAMPLES); the tools are HTTP
  endpoints of the same service with the latencies of their kind, called through the tool
  engine's HTTP path; the planner gets worked examples and makes one call.

Systems, all on the SAME engine adapters (one vLLM with SmolLM2-135M shared by both apps, the
remote search adapter, the tool engine), started once:
  teola      all passes, topology-aware batching (decode pipelining starts each tool call as soon
             as its JSON line is written; prefill split prefills the core prompt's prefix early);
  LlamaIndex the real llama-index-core: a Workflow for search generation, FunctionTools + an
             explicit plan -> concurrent tools -> answer pipeline for the agent
             (bench/baselines/llamaindex_remote.py);
  LangGraph  StateGraphs: judge -> conditional edge -> search -> answer; plan -> Send fan-out of the
             tool calls as parallel branches -> answer (bench/baselines/langgraph_remote.py);
  LlamaDist-PO/TO, LlamaDistPC-PO/TO (only when --systems names them) the Teola paper's baselines on
             teola's runtime, bench.studies.rag.rag's configs: module chain or parallel modules, every pass
             off.

Per workload and trial k (seed + k): each system alone on the first `alone` queries (single-query
latency; teola's give the critical-path bounds), then an open-loop Poisson trace at every rate with
the same queries and arrivals for every system. vLLM's prefix cache is emptied before each trace.
Reported: latency mean / p50 / p99 per (rate, system) with the spread over trials, teola's speedup
per trial and its verdict (bench.studies.rag.rag_analysis.speedups / verdict), LLM calls, prompt and decode
tokens, search / tool calls per query, per-op time, teola's actual / critical-path bound and Fig. 11 shares.

Run: python -m bench remote_apps [--quick] [--apps A,B] [--trials N] [--rates R1,R2,...]
--quick: one rate, 4 queries, 1 trial, 1 query alone per system (CI-sized). Writes
bench/results/remote/remote_apps.{json,md} (--quick: bench/results/remote/quick/).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from dataclasses import asdict
from typing import Any

from bench.lib.remote_services import LATENCY_SOURCES, SEARCH_LATENCY, ServiceProcess, tool_specs
from bench.lib.results import command_line, without_keys
from bench.lib.workloads import poisson_arrivals, search_queries
from bench.studies.rag.rag_analysis import (
    critical_path_bound,
    exclusive_engines,
)
from bench.studies.rag.rag_runs import run_open_loop, run_query
from bench.studies.rag.rag_setup import PAPER_BASELINES, reset_prefix_cache, step_counts
from bench.studies.remote.remote_apps_setup import (
    APPS,
    MAX_CALLS,
    PLAN_EXAMPLES,
    PLAN_INSTRUCTION,
    QUERY_TIMEOUT,
    RUNTIME_SYSTEMS,
    SYSTEMS,
    TOOL_NAMES,
    VARIANTS,
    Settings,
    agent_queries,
)
from bench.studies.remote.remote_apps_summary import summarize_runs


# ---- apps, systems, one query ---------------------------------------------------------------------
def make_apps(
    names: tuple[str, ...], svc: ServiceProcess, search_max_batch: int | None = None
) -> dict[str, Any]:
    from apps import search_generation, tool_agent
    from teola.api.shared_engines import share_engines

    search = {"url": svc.search_url, **({"max_batch": search_max_batch} if search_max_batch else {})}
    llm = {"kind": "vllm", "model": "smollm2-135m-instruct", "step_stats": True}  # decode steps per trace
    builds = {
        "search_generation": lambda: search_generation.build(llm=llm, search=search),
        "tool_agent": lambda: tool_agent.build(
            llm=llm,
            tools={"defaults": False, "http_tools": tool_specs(svc.base_url)},
            tool_names=TOOL_NAMES,
            max_calls=MAX_CALLS,
            plan_instruction=PLAN_INSTRUCTION,
            plan_examples=PLAN_EXAMPLES,
        ),
    }
    apps = {name: builds[name]() for name in names}
    share_engines(apps.values())
    return apps


def baseline(system: str, app: Any) -> Any:
    """The baseline object with `aquery(question) -> Answer` for `system` on a started app."""
    if system == "LlamaIndex":
        from bench.baselines.llamaindex_remote import LlamaIndexSearchGeneration, LlamaIndexToolAgent

        return (LlamaIndexSearchGeneration if app.name == "search_generation" else LlamaIndexToolAgent)(app)
    from bench.baselines.langgraph_remote import LangGraphSearchGeneration, LangGraphToolAgent

    return (LangGraphSearchGeneration if app.name == "search_generation" else LangGraphToolAgent)(app)


async def run_baseline_query(impl: Any, query: dict[str, Any], arrival: float, index: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"i": index, "arrival": arrival, "compile_s": 0.0, "parents": {}}
    try:
        ans = await asyncio.wait_for(impl.aquery(query["question"]), QUERY_TIMEOUT)
        rec.update(ok=True, trace=ans.trace, answer=ans.text[:300])
    except Exception as exc:  # noqa: BLE001 -- a failed query is recorded and reported
        rec.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:500], trace=[])
    rec["latency"] = time.perf_counter() - t0
    return rec


async def run_points(
    system: str,
    app: Any,
    impl: Any,
    queries: list[dict[str, Any]],
    arrivals: list[float] | None,
    offset: int,
    steps: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """A Poisson trace (or, with `arrivals` None, the queries alone one after another). `steps`, when
    given, receives vLLM's engine-step counts of the trace (the engine is shared, so one trace at a time)."""
    await reset_prefix_cache(app)
    before = step_counts(app)
    try:
        return await _trace(system, app, impl, queries, arrivals, offset)
    finally:
        after = step_counts(app)
        if steps is not None and before is not None and after is not None:
            steps.update(after.minus(before).as_dict())


async def _trace(
    system: str, app: Any, impl: Any, queries: list[dict[str, Any]], arrivals: list[float] | None, offset: int
) -> list[dict[str, Any]]:

    def one(i: int, arrival: float) -> Any:
        q = {"question": queries[i]["question"]}
        if system in RUNTIME_SYSTEMS:  # teola, a variant of it, or a Teola-paper baseline on its runtime
            config, policy = RUNTIME_SYSTEMS[system]
            return run_query(app, q, config, policy, arrival, offset + i)
        return run_baseline_query(impl, q, arrival, offset + i)

    if arrivals is None:
        return [await one(i, 0.0) for i in range(len(queries))]
    return await run_open_loop(arrivals, lambda i: one(i, arrivals[i]))


# ---- the suite ----------------------------------------------------------------------------------
def _entry(res: dict[str, Any], rate: str, system: str, lam: float | None) -> dict[str, Any]:
    return res["runs"].setdefault(rate, {}).setdefault(system, {"rate": lam, "records": [], "trials": []})


async def bench_app(app: Any, s: Settings, bar: Any) -> dict[str, Any]:
    """Every trial, rate and system on one started app; records carry their trial and index."""
    impls = {x: baseline(x, app) for x in s.systems if x not in RUNTIME_SYSTEMS}
    queries_for = search_queries if app.name == "search_generation" else agent_queries
    res: dict[str, Any] = {"runs": {}, "bounds": []}
    warm = queries_for(1, s.seed + 1000)
    for system in s.systems:  # warm-up: first-call costs (compile, connections) outside the numbers
        await run_points(system, app, impls.get(system), warm, None, 0)
    bounds = [0.0] * (s.trials * s.n_queries)
    for k in range(s.trials):
        queries, offset = queries_for(s.n_queries, s.seed + k), k * s.n_queries
        for system in s.systems:
            bar.set_postfix_str(f"{app.name} trial {k} alone {system}")
            steps: dict[str, Any] = {}
            recs = await run_points(system, app, impls.get(system), queries[: s.alone], None, offset, steps)
            if system == "teola":
                for r in recs:
                    bounds[r["i"]] = (
                        critical_path_bound(r["parents"], r["trace"], exclusive_engines(app.runtime))
                        if r.get("ok")
                        else 0.0
                    )
            _add(_entry(res, "alone", system, None), recs, k, s.seed + k, None, steps)
            bar.update()
        for lam in s.rates[app.name]:
            arrivals = poisson_arrivals(s.n_queries, lam, s.seed + k)
            for system in s.systems:
                bar.set_postfix_str(f"{app.name} trial {k} {lam} q/s {system}")
                t0, steps = time.perf_counter(), {}
                recs = await run_points(system, app, impls.get(system), queries, arrivals, offset, steps)
                _add(
                    _entry(res, f"{lam:g}", system, lam), recs, k, s.seed + k, time.perf_counter() - t0, steps
                )
                bar.update()
    res["bounds"] = bounds
    summarize_runs(res["runs"], bounds)
    return res


def _add(
    entry: dict[str, Any],
    recs: list[dict[str, Any]],
    k: int,
    seed: int,
    seconds: float | None,
    steps: dict[str, Any] | None = None,
) -> None:
    for r in recs:
        r["trial"] = k
    entry["records"] += recs
    entry["trials"].append(
        {"seed": seed, "seconds": seconds, "loadavg_after": os.getloadavg(), "vllm_steps": steps or {}}
    )


async def bench(
    apps: dict[str, Any], s: Settings, svc: ServiceProcess, progress: bool = True
) -> dict[str, Any]:
    from tqdm import tqdm

    steps = sum(s.trials * len(s.systems) * (1 + len(s.rates[a])) for a in s.apps)
    bar = tqdm(total=steps, desc="remote apps", disable=not progress, dynamic_ncols=True)
    out: dict[str, Any] = {
        "settings": asdict(s),
        "latency_sources": LATENCY_SOURCES,
        "search_latency": {"p50": SEARCH_LATENCY.p50, "p95": SEARCH_LATENCY.p95, "mean": SEARCH_LATENCY.mean},
        "apps": {},
    }
    t0 = time.perf_counter()
    for name in s.apps:
        out["apps"][name] = await bench_app(apps[name], s, bar)
    bar.close()
    out["service_calls"] = await svc.calls()
    out["wall_seconds"] = time.perf_counter() - t0
    return out


async def _main(
    s: Settings, quick: bool, command: str, write: bool, out: str = "remote_apps"
) -> dict[str, Any]:
    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    t0 = time.perf_counter()
    async with ServiceProcess(seed=s.seed, scale=s.latency_scale) as svc:
        apps = make_apps(s.apps, svc, s.search_max_batch)
        options = {"max_inflight": {"llm": s.max_inflight}} if s.max_inflight else {}
        for app in apps.values():
            await app.start(**options)
        startup = time.perf_counter() - t0
        try:
            data = await bench(apps, s, svc)
            data["exclusive_engines"] = sorted(
                {e for a in apps.values() for e in exclusive_engines(a.runtime)}
            )
        finally:
            for app in apps.values():
                await app.stop()
    data.update(startup_seconds=startup, quick=quick)
    if write:
        from bench.lib.plots import write_load_plot
        from bench.lib.results import machine, results_dir
        from bench.studies.remote.remote_apps_report import markdown

        data["machine"] = machine()
        md = markdown(data, command)
        here = results_dir("remote")
        folder = here / "quick" if quick else here
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{out}.json").write_text(json.dumps(without_keys(data, "parents"), indent=1, default=str))
        (folder / f"{out}.md").write_text(md.rstrip() + "\n")
        write_load_plot(out, folder)
        print(md)
    return data


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench remote_apps`."""
    p.add_argument(
        "--quick", action="store_true", help="one rate, 4 queries, 1 trial, 1 query alone (CI-sized)"
    )
    p.add_argument("--apps", default=None, help=f"comma-separated subset of {','.join(APPS)}")
    p.add_argument(
        "--trials", type=int, default=None, help="trials (seeds seed..seed+N-1; default 3, --quick 1)"
    )
    p.add_argument("--queries", type=int, default=None, help="queries per point (default 20, --quick 4)")
    p.add_argument("--rates", default=None, help="comma-separated rates (q/s) for every app")
    p.add_argument(
        "--systems",
        default=None,
        help=f"comma-separated subset of {','.join(SYSTEMS)}, optionally with the Teola paper's "
        f"baselines on teola's runtime ({','.join(PAPER_BASELINES)}) and teola with a pass off "
        f"({','.join(VARIANTS)})",
    )
    p.add_argument(
        "--max-inflight",
        type=int,
        default=None,
        help="teola: batches the vLLM instance may run at once (default: the runtime's)",
    )
    p.add_argument(
        "--search-max-batch",
        type=int,
        default=None,
        help="remote search requests per batch (default: the adapter's)",
    )
    p.add_argument("--no-write", action="store_true", help="print the summary, write no result files")
    p.add_argument(
        "--out",
        default="remote_apps",
        help="results name: bench/results/remote/<out>.md/.json (default remote_apps)",
    )


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench remote_apps` (argv: the options given, for its page)."""
    if not args.out.replace("_", "").isalnum():
        p.error(f"--out must be a plain name (letters, digits, _), got {args.out!r}")
    s = Settings.quick() if args.quick else Settings()
    if args.apps:
        s.apps = tuple(a.strip() for a in args.apps.split(",") if a.strip())
        if unknown := [a for a in s.apps if a not in APPS]:
            p.error(f"unknown app(s) {unknown}; known: {list(APPS)}")
    if args.systems:
        s.systems = tuple(x.strip() for x in args.systems.split(",") if x.strip())
        known = SYSTEMS + PAPER_BASELINES + tuple(VARIANTS)
        if unknown := [x for x in s.systems if x not in known]:
            p.error(f"unknown system(s) {unknown}; known: {list(known)}")
    for flag, value in (("--max-inflight", args.max_inflight), ("--search-max-batch", args.search_max_batch)):
        if value is not None and value < 1:
            p.error(f"{flag} must be >= 1")
    s.max_inflight, s.search_max_batch = args.max_inflight, args.search_max_batch
    if args.trials is not None:
        if args.trials < 1:
            p.error("--trials must be >= 1")
        s.trials = args.trials
    if args.queries is not None:
        if args.queries < 1:
            p.error("--queries must be >= 1")
        s.n_queries, s.alone = args.queries, min(s.alone, args.queries)
    if args.rates:
        try:
            rates = tuple(float(r) for r in args.rates.split(","))
        except ValueError:
            p.error(f"--rates must be comma-separated numbers, got {args.rates!r}")
        if not all(r > 0 for r in rates):
            p.error("--rates must be positive")
        s.rates = {a: rates for a in APPS}
    command = command_line(
        "python -m bench remote_apps",
        (
            ("--quick", args.quick),
            ("--apps", args.apps),
            ("--trials", args.trials),
            ("--queries", args.queries),
            ("--rates", args.rates),
            ("--systems", args.systems),
            ("--max-inflight", args.max_inflight),
            ("--search-max-batch", args.search_max_batch),
            ("--out", None if args.out == "remote_apps" else args.out),
        ),
    )
    data = asyncio.run(_main(s, args.quick, command, not args.no_write, args.out))
    if args.no_write:
        from bench.studies.rag.rag_analysis import speedups

        print(json.dumps(speedups(data), indent=1))
    return 0
