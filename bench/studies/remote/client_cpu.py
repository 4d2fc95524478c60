"""Where the client's CPU goes per query on the remote path (issue 70 item 3): each system of the
deployment study (bench/studies/remote/deploy.py) answers the same queries one at a time with its LLM
on its own emulated GPU vLLM server (`teola emulate`, which runs in another process, so the CPU
measured here is the client's: runtime or library, HTTP, tokenizer and, on RAG, the in-process
embedder, reranker and pgvector client).

Per system and workload: one warm-up query (not measured), then `queries` queries measured with
time.process_time (this process, every thread), then the same queries again under cProfile: the
functions with the most cumulative seconds per query, and the self seconds per query summed by
package (these add up to the profiled total; the profiler's own cost inflates them ~1.5-2x, so read
the plain CPU column for the size and the profile for the shares).

Run: python -m bench client_cpu [--workloads tool_agent,advanced_rag/small] [--queries N]
[--systems teola,LangGraph,LlamaIndex] [--top K] [--out NAME]. Writes
bench/results/remote/client_cpu.{json,md}.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time
from typing import Any

from bench.lib.results import command_line, write_results
from bench.lib.tables import num, table
from bench.studies.remote.deploy import SYSTEMS, VARIANT, WORKLOADS, start_systems, workload_queries
from bench.studies.remote.deploy_systems import baseline_one, make_baseline, teola_one

DEFAULT_WORKLOADS = ("tool_agent", "advanced_rag/small")
# package groups for the self-time table, first match wins (a path fragment of the function's file)
GROUPS = (
    ("teola compile + passes", ("teola/compile/", "teola/passes/", "teola/ir/")),
    ("teola graph tier", ("teola/runtime/graph_tier/",)),
    ("teola engine tier", ("teola/runtime/engine_tier/", "teola/scheduling/", "teola/balancers/")),
    ("teola trace", ("teola/trace/", "teola/runtime/")),
    ("teola api", ("teola/api/", "teola/")),
    ("engines: remote LLM adapter", ("engines/openai/", "engines/llm_text/")),
    ("engines: other", ("engines/",)),
    (
        "openai + httpx + pydantic",
        ("/openai/", "/httpx/", "/httpcore/", "/h11/", "/anyio/", "/pydantic", "/langchain", "/langsmith/"),
    ),
    ("tokenizer + chat template", ("/transformers/", "/tokenizers/", "/jinja2/")),
    ("llama-index", ("/llama_index/",)),
    ("embedder + reranker (torch)", ("/torch/", "/sentence_transformers/", "/numpy/")),
    ("pgvector client", ("/psycopg", "/pgvector/")),
    ("asyncio + selectors", ("/asyncio/", "selectors.py", "/ssl.py", "/socket.py")),
    ("bench harness", ("/bench/",)),
)


def group_of(filename: str) -> str:
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins (C)"
    for label, parts in GROUPS:
        if any(p in filename for p in parts):
            return label
    return "other"


def profile_summary(stats: pstats.Stats, n: int, top: int) -> dict[str, Any]:
    """Cumulative seconds per query of the `top` project functions and self seconds per query by group."""
    raw = stats.stats  # type: ignore[attr-defined]
    groups: dict[str, float] = {}
    rows = []
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in raw.items():
        groups[group_of(filename)] = groups.get(group_of(filename), 0.0) + tt / n
        short = (
            filename.split("/main/", 1)[-1].split("site-packages/", 1)[-1].split("/lib/python3.11/", 1)[-1]
        )
        rows.append(
            {
                "function": f"{short}:{line}({func})",
                "cumulative": ct / n,
                "self": tt / n,
                "calls": nc / n,
                "ours": any(p in filename for p in ("/teola/", "/engines/", "/bench/")),
            }
        )
    by_self = sorted(rows, key=lambda r: -r["self"])[:top]
    ours = sorted((r for r in rows if r["ours"]), key=lambda r: -r["cumulative"])[:top]
    return {
        "total": sum(groups.values()),
        "groups": dict(sorted(groups.items(), key=lambda kv: -kv[1])),
        "top": ours,
        "top_self": by_self,
    }


async def one_query(system: str, app: Any, impl: Any, q: dict[str, Any], i: int) -> dict[str, Any]:
    if system.startswith("teola"):  # "teola, NAME off": teola with that pass off (deploy.VARIANT)
        off = (
            {p: False for p in system.removeprefix("teola, ").removesuffix(" off").split(",")}
            if system != "teola"
            else {}
        )
        return await teola_one(app, q, 0.0, i, off)
    return await baseline_one(app, impl, q, 0.0, i)


async def measure(
    system: str, app: Any, impl: Any, queries: list[dict[str, Any]], warm: dict[str, Any], top: int
) -> dict[str, Any]:
    await one_query(system, app, impl, warm, -1)
    cpu, wall, recs = [], [], []
    for i, q in enumerate(queries):
        c0, t0 = time.process_time(), time.perf_counter()
        recs.append(await one_query(system, app, impl, q, i))
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
    prof = cProfile.Profile(time.process_time)  # CPU seconds, not wall (the default timer)
    prof.enable()
    for i, q in enumerate(queries):
        await one_query(system, app, impl, q, i)
    prof.disable()
    failed = [r.get("error") for r in recs if not r.get("ok")]
    return {
        "cpu": cpu,
        "wall": wall,
        "failed": failed,
        "calls": [r.get("calls") for r in recs],
        "profile": profile_summary(pstats.Stats(prof), len(queries), top),
    }


async def _main(
    workloads: tuple[str, ...], systems: tuple[str, ...], n: int, top: int, passes_off: tuple[str, ...] = ()
) -> dict[str, Any]:
    import contextlib

    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    names = {WORKLOADS[w][0] for w in workloads}
    out: dict[str, Any] = {}
    async with contextlib.AsyncExitStack() as stack:
        servers, apps, engines = await start_systems(
            stack, "a100-llama3.1-8b-measured", tuple(systems), names, 0
        )
        for w in workloads:
            app = apps[WORKLOADS[w][0]]
            queries, warm = workload_queries(w, n, 0), workload_queries(w, 1, 1000)[0]
            for system in systems + tuple(VARIANT.format(p) for p in passes_off):
                impl = (
                    make_baseline(system, app, servers[system].url, engines[system])
                    if not system.startswith("teola")
                    else None
                )
                res = await measure(system, app, impl, queries, warm, top)
                out.setdefault(w, {})[system] = res
                print(
                    f"[client_cpu] {w} {system}: {sum(res['cpu']) / n:.4f} s CPU per query "
                    f"(profiled {res['profile']['total']:.4f})",
                    flush=True,
                )
    return out


def markdown(data: dict[str, Any]) -> str:
    lines = [
        "# Client CPU per query on the remote path (LLM emulated, a100-llama3.1-8b-measured)",
        "",
        f"Command: `{data['command']}` (commit {data['commit']}). "
        + __doc__.split("\n\n")[1].replace("\n", " "),
        "",
    ]
    for w, by_system in data["results"].items():
        lines += [
            f"## {w}",
            "",
            *table(
                ["system", "CPU per query (s)", "wall per query (s)", "profiled (s)", "failed"],
                [
                    [
                        s,
                        num(sum(r["cpu"]) / len(r["cpu"]), 4),
                        num(sum(r["wall"]) / len(r["wall"]), 3),
                        num(r["profile"]["total"], 4),
                        len(r["failed"]),
                    ]
                    for s, r in by_system.items()
                ],
            ),
            "",
        ]
        for s, r in by_system.items():
            lines += [
                f"### {w}: {s}, self seconds per query by package (profiled)",
                "",
                *table(
                    ["package", "self (s)"],
                    [[g, num(v, 4)] for g, v in r["profile"]["groups"].items() if v >= 0.0005],
                ),
                "",
                f"### {w}: {s}, top functions by self seconds per query (profiled)",
                "",
                *table(
                    ["function", "self (s)", "cumulative (s)", "calls"],
                    [
                        [f"`{t['function']}`", num(t["self"], 4), num(t["cumulative"], 4), num(t["calls"], 1)]
                        for t in r["profile"].get("top_self", [])
                    ],
                ),
                "",
                f"### {w}: {s}, teola's and the bench's functions by cumulative seconds per query (profiled)",
                "",
                *table(
                    ["function", "cumulative (s)", "self (s)", "calls"],
                    [
                        [f"`{t['function']}`", num(t["cumulative"], 4), num(t["self"], 4), num(t["calls"], 1)]
                        for t in r["profile"]["top"]
                    ],
                ),
                "",
            ]
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workloads",
        default=",".join(DEFAULT_WORKLOADS),
        help=f"comma-separated subset of {','.join(WORKLOADS)}",
    )
    p.add_argument("--systems", default="teola", help=f"comma-separated subset of {','.join(SYSTEMS)}")
    p.add_argument(
        "--queries", type=int, default=5, help="measured queries per system and workload (default 5)"
    )
    p.add_argument("--top", type=int, default=25, help="functions listed per profile (default 25)")
    p.add_argument(
        "--passes-off",
        default="",
        help="comma-separated default passes: teola with each one off also runs, as 'teola, NAME off'",
    )
    p.add_argument("--out", default="client_cpu", help="results name (default client_cpu)")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    from bench.lib.results import machine

    workloads = tuple(w.strip() for w in args.workloads.split(",") if w.strip())
    systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())
    if unknown := [w for w in workloads if w not in WORKLOADS]:
        p.error(f"unknown workload(s) {unknown}; known: {list(WORKLOADS)}")
    if unknown := [s for s in systems if s not in SYSTEMS]:
        p.error(f"unknown system(s) {unknown}; known: {list(SYSTEMS)}")
    if args.queries < 1 or args.top < 1:
        p.error("--queries and --top must be >= 1")
    if not args.out.replace("_", "").isalnum():
        p.error(f"--out must be a plain name (letters, digits, _), got {args.out!r}")
    passes_off = tuple(x.strip() for x in args.passes_off.split(",") if x.strip())
    if passes_off and "teola" not in systems:
        p.error("--passes-off needs teola among --systems (the variants run on its app and server)")
    results = asyncio.run(_main(workloads, systems, args.queries, args.top, passes_off))
    command = command_line(
        "python -m bench client_cpu",
        (
            ("--workloads", args.workloads),
            ("--systems", args.systems),
            ("--queries", args.queries),
            ("--top", args.top),
            ("--passes-off", args.passes_off),
            ("--out", args.out if args.out != "client_cpu" else None),
        ),
    )
    data = {"command": command, "commit": machine()["commit"], "results": results}
    write_results(args.out, data, markdown(data), subject="remote")
    return 0
