"""One tenant floods, another sends a steady trickle (issue 60): how much does the steady tenant's
latency suffer, what does the flooding tenant get, and is any accepted query lost?

The shipped naive-RAG app on the real engines behind uvicorn, in this process, with two tenants
(API keys) and the server's per-tenant limits (`--max-queries`, setting tenant_max_queries). First
the steady tenant alone sends `--steady` queries, one every `--interval` seconds; then the same while
the flooding tenant keeps `--flood` queries outstanding (each client resends after a 429, waiting
its Retry-After). Reported: the steady tenant's latencies alone and under the flood, the flood's
answers, 429s and losses (a lost query: an accepted one that did not answer).

    python -m bench tenant_flood                    # 10 steady queries, 200 flooding clients
    python -m bench tenant_flood --max-queries 0    # the same without a per-tenant limit
    python -m bench tenant_flood --quick            # 4 steady queries, 20 flooding clients
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from bench.lib.results import machine, percentile, served_here, write_results
from bench.lib.tables import machine_facts, num, table

KEYS = {"steady": "steady-key", "flood": "flood-key"}


async def ask(client: Any, app: str, query: dict[str, Any], tenant: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        r = await client.post(
            f"/v1/apps/{app}/query",
            json={"query": query},
            headers={"Authorization": f"Bearer {KEYS[tenant]}"},
        )
    except Exception as exc:
        return {"kind": "lost", "why": f"{type(exc).__name__}: {exc}", "latency": time.perf_counter() - t0}
    row = {"status": r.status_code, "latency": time.perf_counter() - t0}
    if r.status_code == 200:
        return {**row, "kind": "answered"}
    if r.status_code == 429:
        return {**row, "kind": "limited", "retry_after": float(r.headers.get("retry-after", "1"))}
    return {**row, "kind": "error", "error": r.text[:120]}


async def steady(
    client: Any, app: str, query: dict[str, Any], n: int, interval: float
) -> list[dict[str, Any]]:
    """`n` queries of the steady tenant, one started every `interval` seconds."""
    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(ask(client, app, query, "steady")))
        if i < n - 1:
            await asyncio.sleep(interval)
    return list(await asyncio.gather(*tasks))


async def flooder(client: Any, app: str, query: dict[str, Any], stop: asyncio.Event, rows: list) -> None:
    """One flooding client: resend until `stop`, honouring Retry-After."""
    while not stop.is_set():
        row = await ask(client, app, query, "flood")
        rows.append(row)
        if row["kind"] == "limited":
            try:
                await asyncio.wait_for(stop.wait(), row["retry_after"])
            except TimeoutError:
                pass


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    lat = [r["latency"] for r in rows if r["kind"] == "answered"]
    return {
        "sent": len(rows),
        "answered": len(lat),
        "limited": sum(r["kind"] == "limited" for r in rows),
        "errors": sum(r["kind"] == "error" for r in rows),
        "lost": sum(r["kind"] == "lost" for r in rows),
        "p50": percentile(lat, 50) if lat else None,
        "p99": percentile(lat, 99) if lat else None,
        "max": max(lat) if lat else None,
    }


async def run(
    app_name: str, n_steady: int, interval: float, n_flood: int, max_queries: int
) -> dict[str, Any]:
    import httpx

    from engines.assets.paths import configure_engine_env
    from teola.server import ServerSettings, create_server, resolve_app

    configure_engine_env()
    app = resolve_app(app_name)
    query, _ = app.sample()
    settings = ServerSettings.from_env(
        query_timeout=900,
        api_keys=";".join(f"{t}:{k}" for t, k in KEYS.items()),
        tenant_max_queries=max_queries,
        documents="memory",
    )
    out: dict[str, Any] = {
        "app": app_name,
        "steady_n": n_steady,
        "interval": interval,
        "flood_clients": n_flood,
        "tenant_max_queries": max_queries,
    }
    limits = httpx.Limits(max_connections=n_flood + 20, max_keepalive_connections=n_flood + 20)
    async with served_here(create_server({app_name: app}, settings, progress=print)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=900, limits=limits) as client:
            warm = await ask(client, app_name, query, "steady")
            assert warm["kind"] == "answered", warm
            print(f"[tenants] steady tenant alone: {n_steady} queries, one every {interval:g}s", flush=True)
            out["alone"] = summary(await steady(client, app_name, query, n_steady, interval))
            print(f"[tenants] alone: {out['alone']}", flush=True)
            stop, flood_rows = asyncio.Event(), []
            floods = [
                asyncio.create_task(flooder(client, app_name, query, stop, flood_rows))
                for _ in range(n_flood)
            ]
            await asyncio.sleep(interval)  # the flood fills the engines first
            print(f"[tenants] the same under a flood of {n_flood} clients", flush=True)
            out["flooded"] = summary(await steady(client, app_name, query, n_steady, interval))
            stop.set()
            await asyncio.gather(*floods)
            out["flood"] = summary(flood_rows)
            print(f"[tenants] flooded: {out['flooded']}\n[tenants] flood: {out['flood']}", flush=True)
    return out


def markdown(data: dict[str, Any], command: str) -> str:
    m = data["machine"]
    a, f, fl = data["alone"], data["flooded"], data["flood"]
    ratio = f["p99"] / a["p99"] if a["p99"] and f["p99"] else None
    limit = data["tenant_max_queries"] or "none"
    lines = [
        f"## A flooding tenant and a steady one ({data['app']}, per-tenant limit {limit})",
        "",
        f"Command: `{command}`. {machine_facts(m)} " + (__doc__ or "").split("\n\n")[1].replace("\n", " "),
        "",
    ]
    lines += table(
        ["steady tenant", "queries", "answered", "p50 (s)", "p99 (s)", "max (s)"],
        (
            [label, s["sent"], s["answered"], num(s["p50"], 2), num(s["p99"], 2), num(s["max"], 2)]
            for label, s in (("alone", a), (f"under {data['flood_clients']} flooding clients", f))
        ),
    )
    lines += [
        "",
        f"Steady tenant's p99 under the flood / alone: {ratio:.2f}x." if ratio else "",
        f"Flooding tenant: {fl['sent']} requests, {fl['answered']} answered (p50 {num(fl['p50'], 2)} s), "
        f"{fl['limited']} refused with 429, {fl['errors']} other errors, {fl['lost']} lost.",
    ]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m bench tenant_flood`."""
    parser.add_argument("--app", default="naive_rag")
    parser.add_argument("--steady", type=int, default=10, help="queries of the steady tenant per phase")
    parser.add_argument(
        "--interval", type=float, default=3.0, help="seconds between the steady tenant's queries"
    )
    parser.add_argument(
        "--flood", type=int, default=200, help="clients of the flooding tenant, each resending"
    )
    parser.add_argument(
        "--max-queries", type=int, default=8, help="the server's tenant_max_queries (0: no per-tenant limit)"
    )
    parser.add_argument("--quick", action="store_true", help="4 steady queries, 20 flooding clients")
    parser.add_argument("--out", default="tenant_flood", help="results name under bench/results/overheads/")


def run_cli(args: argparse.Namespace, argv: list[str], parser: argparse.ArgumentParser) -> None:
    """Runs `python -m bench tenant_flood` (argv: the options given, for its page)."""
    n_steady, n_flood = (4, 20) if args.quick else (args.steady, args.flood)
    data = asyncio.run(run(args.app, n_steady, args.interval, n_flood, args.max_queries))
    data["machine"] = machine()
    write_results(
        args.out, data, markdown(data, "python -m bench tenant_flood " + " ".join(argv)), subject="overheads"
    )
    if data["flood"]["lost"] or data["flooded"]["lost"] or data["alone"]["lost"]:
        raise SystemExit("some accepted queries were lost (see above)")
