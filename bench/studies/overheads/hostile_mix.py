"""A hostile mix against a served teola (issue 71): for `--seconds` seconds, `--clients` clients send
requests that try to exhaust the server or widen their own powers, while a well-behaved tenant asks
its questions and a probe asks /healthz twice a second.

The server is `teola serve naive_rag tool_agent` in a child process on 127.0.0.1 (real vLLM, MiniLM,
pgvector, the local tools), with two tenants (API keys) and its default limits. Its memory is the
child's resident set, read from /proc; "idle" is after one warm-up query per app. Each hostile
request is one of the kinds in `HOSTILE` (each a finding of the review, or a malformed body); its
answer is judged: a JSON 4xx (the native API's or the OpenAI door's error object) within
`--deadline` seconds is what the issue asks for; a 2xx (a query the server narrowed and ran), a
5xx, a non-JSON answer or no answer in time are counted apart.

    python -m bench hostile_mix                   # 60 s, 50 clients
    python -m bench hostile_mix --quick           # 15 s, 10 clients
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import time
from typing import Any

from bench.lib.results import machine, percentile, write_results
from bench.lib.tables import machine_facts, num, ratio, table
from bench.studies.overheads.hostile_requests import GOOD, HOSTILE, KEYS, QUESTION, SMALL_DOC


async def send(client: Any, kind: str, deadline: float) -> dict[str, Any]:
    method, path, headers, content = HOSTILE[kind]()
    t0 = time.perf_counter()
    try:
        r = await asyncio.wait_for(
            client.request(method, path, headers=headers, content=content), deadline + 30
        )
    except Exception as exc:  # noqa: BLE001 - any failure to answer is what the study counts
        return {
            "kind": kind,
            "verdict": "no answer",
            "why": f"{type(exc).__name__}",
            "latency": time.perf_counter() - t0,
        }
    latency = time.perf_counter() - t0
    try:
        body = r.json()
        is_json = isinstance(body, dict) and ("error" in body or "detail" in body or r.status_code < 400)
    except ValueError:
        is_json = False
    on_time = latency <= deadline
    if 400 <= r.status_code < 500 and is_json:
        verdict = "json 4xx" if on_time else "json 4xx, late"
    else:
        verdict = f"{r.status_code}{'' if is_json else ' not json'}{'' if on_time else ', late'}"
    return {"kind": kind, "verdict": verdict, "status": r.status_code, "latency": latency}


async def slow_body(port: int, deadline: float) -> dict[str, Any]:
    """A client that announces a 16 MiB body with no key and sends one byte a second."""
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /v1/apps/naive_rag/query HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 16000000\r\n\r\n"
    )
    status = None
    try:
        while time.perf_counter() - t0 < deadline + 30:
            writer.write(b" ")
            await writer.drain()
            try:
                line = await asyncio.wait_for(reader.readline(), 1.0)
            except TimeoutError:
                continue
            status = int(line.split()[1]) if line.startswith(b"HTTP/") else -1
            break
    except (ConnectionError, OSError):
        status = 0  # the server closed the connection
    finally:
        writer.close()
    latency = time.perf_counter() - t0
    if status is None:
        verdict = "no answer"
    else:
        verdict = ("4xx" if 400 <= status < 500 else "closed" if status == 0 else str(status)) + (
            "" if latency <= deadline else ", late"
        )
    return {"kind": "slow_body", "verdict": verdict, "status": status, "latency": latency}


async def hostile_client(
    client: Any, port: int, stop: asyncio.Event, rows: list, deadline: float, seed: int
) -> None:
    rng = random.Random(seed)
    kinds = sorted(HOSTILE) + ["slow_body"]
    while not stop.is_set():
        kind = rng.choice(kinds)
        rows.append(
            await (slow_body(port, deadline) if kind == "slow_body" else send(client, kind, deadline))
        )


async def well_behaved(client: Any, stop: asyncio.Event, rows: list) -> None:
    query = {"question": "Who founded York, and when?", "documents": [SMALL_DOC]}
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            r = await client.post("/v1/apps/naive_rag/query", json={"query": query}, headers=GOOD)
            rows.append({"status": r.status_code, "latency": time.perf_counter() - t0})
        except Exception as exc:  # noqa: BLE001
            rows.append({"status": None, "why": type(exc).__name__, "latency": time.perf_counter() - t0})
        await asyncio.sleep(1.0)


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def probe(client: Any, pid: int, stop: asyncio.Event, health: list, memory: list) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            r = await client.get("/healthz", timeout=10)
            health.append({"status": r.status_code, "latency": time.perf_counter() - t0})
        except Exception as exc:  # noqa: BLE001
            health.append({"status": None, "why": type(exc).__name__, "latency": time.perf_counter() - t0})
        memory.append(rss_mib(pid))
        await asyncio.sleep(0.5)


def start_server(port: int) -> subprocess.Popen:
    env = {**os.environ, "TEOLA_API_KEYS": ";".join(f"{t}:{k}" for t, k in KEYS.items())}
    cmd = [
        sys.executable,
        "-m",
        "teola.cli",
        "serve",
        "naive_rag",
        "tool_agent",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    return subprocess.Popen(cmd, env=env)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def ready_and_warm(client: Any, server: subprocess.Popen) -> None:
    """Wait until the server is ready (up to 15 min), then one warm-up query per app, and 2 s of rest."""
    import httpx

    for _ in range(1800):
        if server.poll() is not None:
            raise SystemExit(f"the server exited during start-up ({server.returncode})")
        try:
            if (await client.get("/readyz")).status_code == 200:
                break
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.5)
    warm = await client.post(
        "/v1/apps/naive_rag/query",
        headers=GOOD,
        json={"query": {"question": "Who founded York?", "documents": [SMALL_DOC]}},
    )
    warm_tools = await client.post("/v1/apps/tool_agent/query", headers=GOOD, json={"query": QUESTION})
    assert warm.status_code == 200 and warm_tools.status_code == 200, (warm.text, warm_tools.text)
    await asyncio.sleep(2)


async def run(seconds: float, clients: int, deadline: float) -> dict[str, Any]:
    import httpx

    port = free_port()
    server = start_server(port)
    base = f"http://127.0.0.1:{port}"
    limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=clients + 10)
    try:
        async with httpx.AsyncClient(base_url=base, timeout=900, limits=limits) as client:
            await ready_and_warm(client, server)
            idle = rss_mib(server.pid)
            print(
                f"[hostile] idle server: {idle:.0f} MiB; {clients} hostile clients for {seconds:g} s",
                flush=True,
            )
            stop = asyncio.Event()
            hostile_rows: list = []
            good_rows: list = []
            health: list = []
            memory: list = []
            tasks = [
                asyncio.create_task(hostile_client(client, port, stop, hostile_rows, deadline, i))
                for i in range(clients)
            ]
            tasks += [
                asyncio.create_task(well_behaved(client, stop, good_rows)),
                asyncio.create_task(probe(client, server.pid, stop, health, memory)),
            ]
            await asyncio.sleep(seconds)
            stop.set()
            await asyncio.gather(*tasks)
            after = await client.post(
                "/v1/apps/naive_rag/query",
                headers=GOOD,
                json={"query": {"question": "Who founded York?", "documents": [SMALL_DOC]}},
            )
            return {
                "seconds": seconds,
                "clients": clients,
                "deadline": deadline,
                "idle_mib": idle,
                "hostile": hostile_rows,
                "good": good_rows,
                "health": health,
                "memory": memory,
                "answers_after": after.status_code == 200,
                "server_alive": server.poll() is None,
            }
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()


def summary(data: dict[str, Any]) -> dict[str, Any]:
    by_kind: dict[str, dict[str, int]] = {}
    statuses: dict[str, dict[str, int]] = {}
    for row in data["hostile"]:
        by_kind.setdefault(row["kind"], {}).setdefault(row["verdict"], 0)
        by_kind[row["kind"]][row["verdict"]] += 1
        code = str(row.get("status"))
        statuses.setdefault(row["kind"], {}).setdefault(code, 0)
        statuses[row["kind"]][code] += 1
    late = [r["latency"] for r in data["hostile"]]
    health = [h["latency"] for h in data["health"]]
    good = [g["latency"] for g in data["good"] if g["status"] == 200]
    return {
        "by_kind": by_kind,
        "statuses": statuses,
        "hostile_sent": len(data["hostile"]),
        "hostile_json_4xx": sum(r["verdict"] == "json 4xx" for r in data["hostile"]),
        "hostile_max_latency": max(late, default=None),
        "health_probes": len(health),
        "health_max": max(health, default=None),
        "health_failed": sum(h["status"] != 200 for h in data["health"]),
        "memory_max_mib": max(data["memory"], default=None),
        "idle_mib": data["idle_mib"],
        "good_sent": len(data["good"]),
        "good_answered": len(good),
        "good_p50": percentile(good, 50) if good else None,
        "good_max": max(good, default=None),
    }


def markdown(data: dict[str, Any], s: dict[str, Any], command: str) -> str:
    m = data["machine"]
    lines = [
        f"## A hostile mix: {data['clients']} clients for {data['seconds']:g} s",
        "",
        f"Command: `{command}`. {machine_facts(m)} " + (__doc__ or "").split("\n\n")[1].replace("\n", " "),
        "",
        *table(
            ["figure", "value"],
            [
                ["/healthz probes (every 0.5 s)", f"{s['health_probes']}, {s['health_failed']} not 200"],
                ["/healthz slowest", f"{num(s['health_max'], 2)} s"],
                [
                    "server memory idle / max",
                    f"{num(s['idle_mib'], 0)} / {num(s['memory_max_mib'], 0)} MiB "
                    f"({ratio(s['memory_max_mib'], s['idle_mib'])})",
                ],
                [
                    "hostile requests",
                    f"{s['hostile_sent']}, {s['hostile_json_4xx']} a JSON 4xx within "
                    f"{data['deadline']:g} s; slowest answer {num(s['hostile_max_latency'], 2)} s",
                ],
                [
                    "well-behaved tenant",
                    f"{s['good_answered']} of {s['good_sent']} answered; p50 "
                    f"{num(s['good_p50'], 2)} s, max {num(s['good_max'], 2)} s",
                ],
                [
                    "after the mix",
                    f"server alive: {data['server_alive']}; a query answers: {data['answers_after']}",
                ],
            ],
        ),
        "",
        "A verdict names the status when it is not a JSON 4xx within the deadline (a 200 is a query the "
        "server narrowed and ran; 'late': answered after the deadline; 'no answer': none within the deadline "
        "+ 30 s).",
        "",
    ]
    lines += table(
        ["hostile kind", "verdicts", "statuses"],
        (
            [
                kind,
                ", ".join(f"{v}: {n}" for v, n in sorted(verdicts.items())),
                ", ".join(f"{c}: {n}" for c, n in sorted(s["statuses"][kind].items())),
            ]
            for kind, verdicts in sorted(s["by_kind"].items())
        ),
    )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m bench hostile_mix`."""
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the hostile clients send")
    parser.add_argument(
        "--clients", type=int, default=50, help="hostile clients, each sending one request at a time"
    )
    parser.add_argument("--deadline", type=float, default=5.0, help="seconds within which a 4xx is on time")
    parser.add_argument("--quick", action="store_true", help="15 s, 10 clients")
    parser.add_argument("--out", default="hostile_mix", help="results name under bench/results/overheads/")


def run_cli(args: argparse.Namespace, argv: list[str], parser: argparse.ArgumentParser) -> None:
    """Runs `python -m bench hostile_mix` (argv: the options given, for its page)."""
    seconds, clients = (15.0, 10) if args.quick else (args.seconds, args.clients)
    data = asyncio.run(run(seconds, clients, args.deadline))
    data["machine"] = machine()
    s = summary(data)
    data["summary"] = s
    compact = {k: v for k, v in data.items() if k not in ("hostile", "health", "memory")}
    write_results(
        args.out,
        compact,
        markdown(data, s, "python -m bench hostile_mix " + " ".join(argv)),
        subject="overheads",
    )
    print(markdown(data, s, "python -m bench hostile_mix " + " ".join(argv)))
