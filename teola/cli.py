"""The `teola` command line.

    teola run advanced_rag            # one sample question on the embedded engines: answer, timings, Gantt
    teola serve advanced_rag --port 8000
    teola query advanced_rag --question "..." --document notes.txt
                             [--url http://127.0.0.1:8000 | --in-process] [--stream]
    teola ingest docs/ --app advanced_rag | teola documents list|delete --app advanced_rag
    teola compile advanced_rag --format mermaid
    teola setup | teola doctor | teola tune [--dry-run] | teola bench compile
    teola profile [app] | teola simulate advanced_rag --profile <profile> --rate 2 --instances llm=4
    teola plan JOB --gpus 8 --profile <profile> [--out plan.json] | teola run-job JOB --plan plan.json

An app is a built-in name (`apps.<name>.build()`) or `module:attr` (an App, or a zero-argument callable
returning one). Every command returns a process exit code: 0 ok, 1 failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

from teola.cli_apps import (
    CliError,
    add_engine_options,
    add_query_options,
    config_from_args,
    engine_env,
    load_apps,
    print_response,
    print_result,
    progress,
    query_from_args,
)
from teola.cli_documents import add_commands as add_documents_commands
from teola.cli_ingest import add_commands as add_ingest_commands
from teola.cli_logging import run_logged, terminal_err, terminal_out, uvicorn_log_config
from teola.cli_machine import MachineCliError
from teola.cli_machine import add_commands as add_machine_commands
from teola.cli_remote import RemoteCliError, stream_query
from teola.emulate.cli import EmulateCliError
from teola.emulate.cli import add_commands as add_emulate_commands
from teola.plan.cli import PlanCliError
from teola.plan.cli import add_commands as add_plan_commands
from teola.server.loading import AppNotFound, builtin_apps, resolve_app
from teola.sim.cli import SimCliError
from teola.sim.cli import add_commands as add_sim_commands

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `teola` console script; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    if getattr(args, "verbose", True):  # --verbose, or a command that starts no engines
        return _dispatch(args)
    return run_logged(args.command, lambda: _dispatch(args))  # engine output into a log file


def _dispatch(args: argparse.Namespace) -> int:
    """Run the command; a user-facing failure becomes `teola: error: ...` on the terminal and an exit code."""
    try:
        return int(args.handler(args) or 0)
    except (
        AppNotFound,
        CliError,
        SimCliError,
        PlanCliError,
        EmulateCliError,
        MachineCliError,
        RemoteCliError,
    ) as exc:
        print(f"teola: error: {exc}", file=terminal_err(), flush=True)
        return exc.code if isinstance(exc, (CliError, RemoteCliError)) else 2
    except KeyboardInterrupt:
        print("teola: interrupted", file=terminal_err(), flush=True)
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`, which exited early
        os.dup2(os.open(os.devnull, os.O_WRONLY), terminal_out().fileno())
        return 0


# ---- commands -------------------------------------------------------------------------------------
def cmd_compile(args: argparse.Namespace) -> int:
    """Print an app's optimized graph (or p-graph) for a sample or given query; no engine starts."""
    app = resolve_app(args.app)
    query = query_from_args(args) if args.question else app.placeholder_query()
    try:
        compiled = app.compile(query, config_from_args(args))
    except (ValueError, TypeError) as exc:
        raise CliError(f"cannot compile app {app.name!r}: {exc}", 2) from None
    graph = compiled.egraph if args.graph == "egraph" else compiled.pgraph
    print({"text": graph.to_text, "dot": graph.to_dot, "mermaid": graph.to_mermaid}[args.format]())
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve one or more apps over HTTP until interrupted (Ctrl-C / SIGTERM stop the engines cleanly)."""
    import uvicorn

    from teola.server import ServerSettings, create_server
    from teola.server.http_protocol import uvicorn_options

    engine_env()
    apps = load_apps(args.apps, args.executor)
    settings = ServerSettings.from_env(api_key=args.api_key)
    server = create_server(apps, settings, progress=progress, host=args.host)
    progress(f"serving {', '.join(apps)} on http://{args.host}:{args.port} (docs at /docs)")
    uvicorn.run(
        server,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        log_config=uvicorn_log_config(),
        **uvicorn_options(),
    )
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Quick start: serve the app on 127.0.0.1 (a free port), send one sample query over HTTP, print the
    answer and the per-primitive timing breakdown; stop (or keep serving with --keep-serving)."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING" if args.verbose else "INFO")  # INFO: into the log
    engine_env()
    apps = load_apps([args.app], args.executor)
    name = next(iter(apps))
    if args.question:
        query, source = query_from_args(args), "command line"
    else:
        query, source = apps[name].sample()
    return asyncio.run(_run_quickstart(apps, name, query, source, args))


async def _run_quickstart(
    apps: dict[str, Any], name: str, query: dict[str, Any], source: str, args: argparse.Namespace
) -> int:
    import httpx
    import uvicorn

    from teola.server import ServerSettings, create_server
    from teola.server.http_protocol import uvicorn_options

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    port = sock.getsockname()[1]
    server_app = create_server(apps, ServerSettings.from_env(), progress=progress, host=args.host)
    config = uvicorn.Config(
        server_app, log_level="warning", lifespan="on", log_config=uvicorn_log_config(), **uvicorn_options()
    )
    server = uvicorn.Server(config)
    progress(
        f"starting app {name!r} (real engines take a while to start: importing vLLM, loading models) ..."
    )
    t0 = time.perf_counter()
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if serving.done():
                serving.result()  # start-up failed: re-raise its error
                raise CliError(f"the server for {name!r} exited during start-up")
            await asyncio.sleep(0.05)
        url = f"http://{args.host}:{port}"
        progress(f"server ready at {url} after {time.perf_counter() - t0:.1f}s")
        docs = query.get("documents") or []
        progress(f"query: {query['question']!r} with {len(docs)} document(s) ({source})")
        async with httpx.AsyncClient(base_url=url, timeout=None) as client:
            response = await client.post(
                f"/v1/apps/{name}/query", json={"query": query, "config": config_from_args(args)}
            )
        code = print_response(response, as_json=args.json)
        if args.keep_serving:
            progress(f"still serving at {url} (Ctrl-C to stop)")
            await serving
        return code
    finally:
        server.should_exit = True
        if not serving.done():
            await serving
        elif (
            not serving.cancelled()
            and serving.exception() is not None
            and not isinstance(serving.exception(), SystemExit)
        ):
            raise serving.exception()  # type: ignore[misc]
        sock.close()
        progress("stopped")


def cmd_query(args: argparse.Namespace) -> int:
    """Send one query to a running server (--url) or run it in this process (--in-process)."""
    query = query_from_args(args)
    config = config_from_args(args)
    if args.stream:
        if args.in_process:
            raise CliError("--stream reads a server's event stream; leave out --in-process", 2)
        return stream_query(args, query, config)
    if args.in_process:
        engine_env()
        app = next(iter(load_apps([args.app], "local").values()))
        return asyncio.run(_query_in_process(app, query, config, args.json))
    import httpx

    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    url = args.url.rstrip("/")
    try:
        response = httpx.post(
            f"{url}/v1/apps/{args.app}/query",
            json={"query": query, "config": config},
            headers=headers,
            timeout=None,
        )
    except httpx.TransportError as exc:
        raise CliError(
            f"cannot reach the server at {url} ({type(exc).__name__}: {exc}); start one with "
            f"`teola serve {args.app}` or use --in-process"
        ) from None
    return print_response(response, as_json=args.json)


async def _query_in_process(app: Any, query: dict[str, Any], config: dict[str, Any], as_json: bool) -> int:
    from teola.runtime import QueryError

    progress(f"starting engines of app {app.name!r} ...")
    try:
        await app.start()
        result = await app.run(query, config)
    except (ValueError, TypeError) as exc:
        raise CliError(f"invalid query: {exc}", 2) from None
    except QueryError as exc:
        raise CliError(f"query failed: {exc}") from None
    finally:
        await app.stop()
    body = {
        "output": result.output,
        "trace": result.trace,
        "query_id": result.query_id,
        "latency": result.latency,
    }
    print_result(body, as_json)
    return 0


def _add_app_commands(sub: Any, apps_help: str) -> None:
    """The commands that load an app: `run`, `serve`, `query` and `compile`."""
    sp = sub.add_parser(
        "run", help="quick start: serve an app, send one sample query, print answer and timings"
    )
    sp.add_argument("app", help=apps_help)
    sp.add_argument("--host", default=DEFAULT_HOST)
    sp.add_argument("--port", type=int, default=0, help="0 = a free port (default)")
    sp.add_argument("--keep-serving", action="store_true", help="keep serving after the sample query")
    sp.add_argument("--json", action="store_true", help="print the raw JSON response")
    add_query_options(sp, required=False)
    add_engine_options(sp)
    sp.set_defaults(handler=cmd_run)

    sp = sub.add_parser("serve", help="serve apps over HTTP")
    sp.add_argument("apps", nargs="+", metavar="app", help=apps_help)
    sp.add_argument("--host", default=DEFAULT_HOST)
    sp.add_argument("--port", type=int, default=DEFAULT_PORT)
    sp.add_argument("--api-key", default=None, help="require this bearer key (default: env TEOLA_API_KEY)")
    sp.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    add_engine_options(sp)
    sp.set_defaults(handler=cmd_serve)

    sp = sub.add_parser("query", help="send one query to a server (or run it in-process)")
    sp.add_argument("app", help="app name on the server (or, with --in-process, " + apps_help + ")")
    add_query_options(sp, required=True)
    sp.add_argument("--url", default=f"http://{DEFAULT_HOST}:{DEFAULT_PORT}")
    sp.add_argument("--api-key", default=os.environ.get("TEOLA_API_KEY"))
    sp.add_argument(
        "--in-process", action="store_true", help="start the engines here instead of using a server"
    )
    sp.add_argument(
        "--stream", action="store_true", help="print the answer's tokens as they arrive, then the timings"
    )
    sp.add_argument("--json", action="store_true", help="print the raw JSON response")
    sp.set_defaults(handler=cmd_query)

    sp = sub.add_parser("compile", help="print an app's optimized graph (no engines start)")
    sp.add_argument("app", help=apps_help)
    sp.add_argument("--format", choices=("text", "dot", "mermaid"), default="text")
    sp.add_argument("--graph", choices=("egraph", "pgraph"), default="egraph")
    add_query_options(sp, required=False)
    sp.set_defaults(handler=cmd_compile)


def _parser() -> argparse.ArgumentParser:
    apps_help = f"built-in app ({', '.join(builtin_apps())}) or module:attr"
    p = argparse.ArgumentParser(
        prog="teola", description="Serve LLM apps as optimized primitive-level dataflow graphs."
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    _add_app_commands(sub, apps_help)
    add_ingest_commands(sub)
    add_documents_commands(sub)
    add_machine_commands(sub)
    add_sim_commands(sub, apps_help)
    add_plan_commands(sub)
    add_emulate_commands(sub)
    return p


if __name__ == "__main__":
    sys.exit(main())
