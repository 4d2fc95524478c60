"""Helpers every study shares: result files and machine facts, the percentile the pages report, and
serving on loopback (a stand-in service, a teola server, stopping a child process)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench.lib.catalog import SUBJECTS

ROOT = Path(__file__).resolve().parents[2]  # the source checkout bench/ lives in
RESULTS = ROOT / "bench" / "results"  # one folder per subject, as bench/studies; FRONT.md and INDEX.md
ARCHIVE = "archive"  # older pages no current study writes, whose subject is unclear


def results_dir(subject: str) -> Path:
    """bench/results/<subject>/: the result files of the studies of `subject` (a key of
    bench/lib/catalog.py's SUBJECTS, the folder of bench/studies the study lives in), or the archive."""
    if subject not in SUBJECTS and subject != ARCHIVE:
        raise ValueError(f"subject {subject!r}: one of {', '.join(SUBJECTS)} (bench/lib/catalog.py)")
    return RESULTS / subject


def result_dirs() -> list[Path]:
    """Every folder of result files: the subjects' in SUBJECTS' order, then the archive."""
    return [results_dir(s) for s in (*SUBJECTS, ARCHIVE)]


def machine() -> dict:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    ).stdout.strip()
    from engines.machine.hardware import cpu_llm_dtype

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "commit": rev,
        "cpu_llm_dtype": cpu_llm_dtype("auto"),
    }  # what a CPU vLLM engine with the default dtype runs


def write_results(name: str, data: dict, markdown: str, compact: bool = False, *, subject: str) -> None:
    """bench/results/<subject>/<name>.json (indented, or `compact` for large results) and <name>.md;
    `subject` is the calling study's (its folder under bench/studies)."""
    folder = results_dir(subject)
    (folder / name).parent.mkdir(parents=True, exist_ok=True)  # `name` may start with quick/
    layout = {"separators": (",", ":")} if compact else {"indent": 2}
    (folder / f"{name}.json").write_text(json.dumps({"machine": machine(), **data}, default=str, **layout))
    (folder / f"{name}.md").write_text(markdown.rstrip() + "\n")
    print(markdown)


def command_line(prog: str, flags: tuple[tuple[str, Any], ...]) -> str:
    """The command that reproduces a run: `prog` and the flags that were given (True: a switch)."""
    return prog + "".join(
        f" {flag}" + (f" {value}" if value is not True else "") for flag, value in flags if value
    )


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (q in [0, 100]) with linear interpolation between closest ranks (numpy's
    default); nan for an empty list. The one percentile every benchmark reports."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def without_keys(data: Any, *keys: str) -> Any:
    """`data` (nested dicts and lists) with every dict entry under one of `keys` left out: what the
    result JSON files keep of large per-query records."""
    if isinstance(data, dict):
        return {k: without_keys(v, *keys) for k, v in data.items() if k not in keys}
    if isinstance(data, list):
        return [without_keys(v, *keys) for v in data]
    return data


def rounded(data: Any, digits: int = 4) -> Any:
    """`data` (nested dicts and lists) with every float rounded to `digits` decimals: per-query timings
    kept to 0.1 ms, which is what a result JSON needs to re-render its page."""
    if isinstance(data, float):
        return round(data, digits)
    if isinstance(data, dict):
        return {k: rounded(v, digits) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [rounded(v, digits) for v in data]
    return data


def serve_in_thread(api: Any) -> tuple[str, Any]:
    """Serve the ASGI app `api` on a free loopback port from a daemon thread (a benchmark's stand-in
    for a remote tool); returns its base URL and the uvicorn server (set `should_exit` to stop it)."""
    import socket
    import threading

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(api, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server


@contextlib.asynccontextmanager
async def served_here(server_app: Any) -> AsyncIterator[str]:
    """Serve a teola server on a free loopback port in this event loop (uvicorn with teola's HTTP
    protocol options and a deep backlog, for benchmarks that send many queries at once); yields its
    base URL and stops it on exit."""
    import asyncio
    import socket

    import uvicorn

    from teola.server.http_protocol import uvicorn_options

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(server_app, log_level="warning", backlog=4096, **uvicorn_options())
    )
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if serving.done():
                serving.result()
                raise RuntimeError("the teola server exited during start-up")
            await asyncio.sleep(0.1)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await serving
        sock.close()


async def stop_process(proc: subprocess.Popen | None, grace_s: float = 30.0) -> None:
    """Terminate a child process that still runs; kill it if it has not exited after `grace_s`."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        await asyncio.to_thread(proc.wait, grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
