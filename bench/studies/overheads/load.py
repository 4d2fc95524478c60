"""Many concurrent small queries over HTTP on loopback (issue 14): does the server lose any, and does
its memory grow from wave to wave?

The shipped naive-RAG app on the real engines behind uvicorn (teola's protocol class), in this
process; `--n` queries (its sample question and documents) sent at once, in `--waves` waves. Every
reply must be an answer (200) or a JSON error `{"error", "detail"}`; anything else (a connection
error, a non-JSON body) counts as lost. RSS is read after a warm-up query and after each wave, for
this process (server and client) and for the engine child processes (vLLM's engine core).

    python -m bench load              # 200 queries at once, 2 waves (the server's defaults)
    python -m bench load --arenas 0 --out load_glibc_arenas   # the same with glibc's default malloc arenas
    python -m bench load --quick      # 20 queries, 1 wave
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import psutil

from bench.lib.results import machine, percentile, served_here, write_results
from bench.lib.tables import machine_facts, num, table


def rss_mib() -> dict[str, float]:
    me = psutil.Process()
    kids = 0
    for child in me.children(recursive=True):
        try:
            kids += child.memory_info().rss
        except psutil.Error:
            pass
    return {"server": me.memory_info().rss / 2**20, "engines": kids / 2**20}


async def one(client: Any, app: str, body: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        r = await client.post(f"/v1/apps/{app}/query", json=body)
    except Exception as exc:  # a lost query: no HTTP answer at all
        return {
            "status": None,
            "kind": "lost",
            "why": f"{type(exc).__name__}: {exc}",
            "latency": time.perf_counter() - t0,
        }
    latency = time.perf_counter() - t0
    try:
        data = r.json()
    except ValueError:
        return {"status": r.status_code, "kind": "lost", "why": "non-JSON body", "latency": latency}
    if r.status_code == 200 and isinstance(data.get("output"), str):
        return {"status": 200, "kind": "answered", "latency": latency}
    if r.status_code >= 400 and set(data) == {"error", "detail"}:
        return {"status": r.status_code, "kind": "json_error", "error": data["error"], "latency": latency}
    return {
        "status": r.status_code,
        "kind": "lost",
        "why": f"unexpected body {str(data)[:80]}",
        "latency": latency,
    }


async def run(app_name: str, n: int, waves: int, arenas: int | None = None) -> dict[str, Any]:
    import httpx

    from engines.assets.paths import configure_engine_env
    from teola.server import ServerSettings, create_server, resolve_app

    configure_engine_env()
    app = resolve_app(app_name)
    query, _ = app.sample()
    settings = ServerSettings.from_env(query_timeout=900)
    if arenas is not None:
        settings.malloc_arenas = arenas
    out: dict[str, Any] = {"app": app_name, "n": n, "waves": [], "malloc_arenas": settings.malloc_arenas}
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    async with served_here(create_server({app_name: app}, settings, progress=print)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=900, limits=limits) as client:
            warm = await one(client, app_name, {"query": query})
            assert warm["kind"] == "answered", warm
            out["rss_start"] = rss_mib()
            for w in range(waves):
                t0 = time.perf_counter()
                rows = await asyncio.gather(*(one(client, app_name, {"query": query}) for _ in range(n)))
                wall = time.perf_counter() - t0
                lat = [r["latency"] for r in rows]
                wave = {
                    "wall": wall,
                    "answered": sum(r["kind"] == "answered" for r in rows),
                    "json_errors": sum(r["kind"] == "json_error" for r in rows),
                    "lost": sum(r["kind"] == "lost" for r in rows),
                    "errors": sorted(
                        {f"{r['status']} {r.get('error')}" for r in rows if r["kind"] == "json_error"}
                    ),
                    "lost_why": sorted({r["why"] for r in rows if r["kind"] == "lost"})[:5],
                    "p50": percentile(lat, 50),
                    "p99": percentile(lat, 99),
                    "rss": rss_mib(),
                }
                out["waves"].append(wave)
                print(
                    f"[load] wave {w + 1}: {wave['answered']} answered, {wave['json_errors']} JSON errors, "
                    f"{wave['lost']} lost in {wall:.1f} s; RSS server {wave['rss']['server']:.0f} MiB, "
                    f"engines {wave['rss']['engines']:.0f} MiB",
                    flush=True,
                )
    return out


def markdown(data: dict[str, Any], command: str) -> str:
    m = data["machine"]
    start = data["rss_start"]
    arenas = data.get("malloc_arenas")
    which = f"{arenas} malloc arenas (the server's default)" if arenas else "glibc's default malloc arenas"
    lines = [
        f"## {data['n']} concurrent queries over HTTP ({which}): nothing lost, memory per wave",
        "",
        f"Command: `{command}`. {machine_facts(m)} " + (__doc__ or "").split("\n\n")[1].replace("\n", " "),
        "",
    ]
    rows = [["after warm-up", *[""] * 7, num(start["server"], 0), num(start["engines"], 0)]]
    rows += [
        [
            i,
            w["answered"],
            w["json_errors"],
            w["lost"],
            num(w["wall"]),
            num(data["n"] / w["wall"], 2),
            num(w["p50"]),
            num(w["p99"]),
            num(w["rss"]["server"], 0),
            num(w["rss"]["engines"], 0),
        ]
        for i, w in enumerate(data["waves"], 1)
    ]
    lines += table(
        [
            "wave",
            "answered",
            "JSON errors",
            "lost",
            "wall (s)",
            "queries/s",
            "p50 (s)",
            "p99 (s)",
            "server RSS (MiB)",
            "engines RSS (MiB)",
        ],
        rows,
    )
    last = data["waves"][-1]["rss"]
    lines += [
        "",
        f"RSS growth from warm-up to the last wave: server {last['server'] - start['server']:+.0f} MiB, "
        f"engines {last['engines'] - start['engines']:+.0f} MiB.",
    ]
    errors = sorted({e for w in data["waves"] for e in w["errors"]})
    if errors:
        lines.append(f"JSON errors seen: {', '.join(errors)}.")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m bench load`."""
    parser.add_argument("--app", default="naive_rag")
    parser.add_argument("--n", type=int, default=200, help="queries sent at once per wave")
    parser.add_argument("--waves", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="20 queries, 1 wave")
    parser.add_argument(
        "--arenas",
        type=int,
        default=None,
        help="the server's malloc_arenas setting (0: glibc's default); default: the server's",
    )
    parser.add_argument("--out", default="load", help="results name under bench/results/overheads/")


def run_cli(args: argparse.Namespace, argv: list[str], parser: argparse.ArgumentParser) -> None:
    """Runs `python -m bench load` (argv: the options given, for its page)."""
    n, waves = (20, 1) if args.quick else (args.n, args.waves)
    data = asyncio.run(run(args.app, n, waves, args.arenas))
    data["machine"] = machine()
    write_results(
        args.out, data, markdown(data, "python -m bench load " + " ".join(argv)), subject="overheads"
    )
    if any(w["lost"] for w in data["waves"]):
        raise SystemExit("some queries were lost (see above)")
