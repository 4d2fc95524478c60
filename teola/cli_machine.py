"""The `teola` commands about this machine and checkout: `setup` (prepare the offline models),
`doctor` (check the engine stack), `tune` (measure engine settings here) and `bench` (run a
benchmark suite of the source checkout)."""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any


class MachineCliError(Exception):
    """A usage failure of these commands: printed as `teola: error: <message>`, exit code 2."""


def cmd_setup(args: argparse.Namespace) -> int:
    """Prepare the offline models (engines.tuning.setup_cli.run_setup)."""
    return _setup_cli("run_setup")()


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check the engine stack and report the engine settings in force
    (engines.tuning.setup_cli.run_doctor)."""
    return _setup_cli("run_doctor")()


def cmd_tune(args: argparse.Namespace) -> int:
    """Probe candidate engine settings on this machine and keep the fastest (engines.tuning.tune)."""
    return _setup_cli("run_tune")(write=not args.dry_run)


def cmd_bench(args: argparse.Namespace) -> int:
    """Run `python -m bench <study>` with the remaining arguments, from the source checkout (the
    benchmarks are not part of the installed package)."""
    root = Path(__file__).resolve().parents[1]  # the source checkout teola runs from (where bench/ lives)
    suites = _bench_suites(root)
    if args.suite not in suites:
        raise MachineCliError(
            f"unknown benchmark study {args.suite!r}; studies: {', '.join(suites) or 'none'}"
            + ("" if suites else " (benchmarks live in bench/ of a source checkout)")
        )
    return subprocess.run([sys.executable, "-m", "bench", args.suite, *args.args], cwd=root).returncode


def add_commands(sub: Any) -> None:
    """Add `setup`, `doctor`, `tune` and `bench` to the `teola` parser's subcommands."""
    sub.add_parser("setup", help="prepare the offline models").set_defaults(handler=cmd_setup)
    sub.add_parser("doctor", help="check the engine stack, show the engine settings").set_defaults(
        handler=cmd_doctor
    )
    tune = sub.add_parser(
        "tune", help="measure candidate engine settings here and keep the fastest (~1.5 min)"
    )
    tune.add_argument("--dry-run", action="store_true", help="print the measurements, write nothing")
    tune.set_defaults(handler=cmd_tune)
    sp = sub.add_parser("bench", help="run a benchmark study (`python -m bench list` prints them)")
    sp.add_argument("suite")
    sp.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the suite")
    sp.set_defaults(handler=cmd_bench)


def _setup_cli(name: str) -> Any:
    try:
        module = importlib.import_module("engines.tuning.setup_cli")
    except ModuleNotFoundError as exc:
        if exc.name in ("engines", "engines.tuning.setup_cli"):
            raise MachineCliError(
                f"`teola {name.removeprefix('run_')}` needs engines/tuning/setup_cli.py, which this "
                "installation does not have"
            ) from None
        raise
    return getattr(module, name)


def _bench_suites(root: Path) -> list[str]:
    """The studies of bench/'s table (bench/lib/catalog.py, read as text: teola does not import bench),
    with `list` and `report`."""
    catalog = root / "bench" / "lib" / "catalog.py"
    if not catalog.is_file():
        return []
    # an entry is `S("name", ...)`, its name on the same line or, formatted, on the next
    return [
        "list",
        "report",
        *re.findall(r'^\s*S\(\s*"([a-z_0-9]+)"', catalog.read_text(encoding="utf-8"), re.M),
    ]
