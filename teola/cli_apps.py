"""What the `teola` commands that load apps and run queries share (`run`, `serve`, `query`,
`compile`): their usage errors (`CliError`), the apps loaded by name, the engines' environment, the
query and config given on the command line, and the answer printed with its timings."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from teola.cli_logging import terminal_err, terminal_out
from teola.server.loading import resolve_app
from teola.trace.gantt import terminal_gantt
from teola.trace.table import timing_table


class CliError(Exception):
    """A user-facing failure: printed as `teola: error: <message>` with exit code `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def add_query_options(sp: argparse.ArgumentParser, required: bool) -> None:
    """--question, --document (repeatable) and --config: a query given on the command line."""
    sp.add_argument("--question", "-q", required=required, help="the question")
    sp.add_argument("--document", "-d", action="append", metavar="FILE", help="a UTF-8 document (repeatable)")
    sp.add_argument(
        "--config", help='query config as JSON (e.g. \'{"passes": {"prefill_split": false}}\') or @file'
    )


def add_engine_options(sp: argparse.ArgumentParser) -> None:
    """--executor and --verbose: where a command's engines run and where their output goes."""
    sp.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where engine instances run (default: in this process)",
    )
    sp.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="show the engines' and libraries' output "
        "(vLLM, torch, ...) here instead of in a log file under <cache>/logs",
    )


def load_apps(specs: Sequence[str], executor: str) -> dict[str, Any]:
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        raise CliError("--executor ray needs Ray: pip install 'teola[ray]'", 2)
    apps: dict[str, Any] = {}
    for spec in specs:
        app = resolve_app(spec)
        if app.name in apps:
            raise CliError(f"two apps are named {app.name!r}; each served app needs its own name", 2)
        if executor == "ray":
            app.config.setdefault("runtime", {})["executor"] = "ray"
        apps[app.name] = app
    return apps


def engine_env() -> None:
    try:
        from engines.assets.paths import configure_engine_env
    except ImportError:
        return
    configure_engine_env()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def query_from_args(args: argparse.Namespace) -> dict[str, Any]:
    if not args.question:
        raise CliError("--question is required", 2)
    query: dict[str, Any] = {"question": args.question}
    docs = []
    for path in args.document or []:
        try:
            docs.append(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise CliError(f"cannot read document {path!r}: {exc.strerror}", 2) from None
    if docs:
        query["documents"] = docs
    return query


def config_from_args(args: argparse.Namespace) -> dict[str, Any]:
    raw = getattr(args, "config", None)
    if not raw:
        return {}
    try:
        config = json.loads(Path(raw[1:]).read_text() if raw.startswith("@") else raw)
    except (json.JSONDecodeError, OSError) as exc:
        raise CliError(f"--config must be a JSON object or @file.json: {exc}", 2) from None
    if not isinstance(config, dict):
        raise CliError("--config must be a JSON object", 2)
    return config


def print_response(response: Any, as_json: bool) -> int:
    try:
        body = response.json()
    except ValueError:
        raise CliError(
            f"server answered {response.status_code} with a non-JSON body: {response.text[:500]}"
        ) from None
    if response.status_code != 200:
        raise CliError(f"query failed with HTTP {response.status_code}: {body.get('detail', body)}")
    print_result(body, as_json)
    return 0


def print_result(body: dict[str, Any], as_json: bool) -> None:
    out = terminal_out()
    if as_json:
        print(json.dumps(body, indent=2, default=str), file=out, flush=True)
        return
    output = body.get("output")
    answer = output.strip() if isinstance(output, str) else json.dumps(output, indent=2, default=str)
    print(
        f"\nAnswer:\n{answer}\n\nquery {body.get('query_id')}  latency "
        f"{1000 * float(body.get('latency') or 0):.0f} ms\n",
        file=out,
    )
    print(timing_table(body.get("trace") or []), file=out)
    print("\nTimeline:\n" + terminal_gantt(body.get("trace") or []), file=out, flush=True)


def progress(message: str) -> None:
    print(f"[teola] {message}", file=terminal_err(), flush=True)
