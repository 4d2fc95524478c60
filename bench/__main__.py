"""The one entry point of the benchmarks: `python -m bench STUDY [options]` runs a study of the table
in bench/lib/catalog.py, `python -m bench STUDY --help` lists its options, `python -m bench list` prints
the table and `python -m bench report [--plots [NAME ...]]` rebuilds BENCHMARKS.md (bench/lib/report.py)."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

import bench.lib.catalog as catalog

USAGE = (
    "python -m bench STUDY [options] | python -m bench STUDY --help | python -m bench list [--markdown] | "
    "python -m bench report"
)


def run(name: str, argv: list[str]) -> Any:
    """Run the study `name` with the options `argv` (what its page names as its command)."""
    study = catalog.BY_NAME[name]
    module = importlib.import_module(f"bench.{study.module}")
    if study.main:
        return module.main(argv)
    first = (module.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    p = argparse.ArgumentParser(prog=f"python -m bench {name}", description=first)
    module.add_arguments(p)
    return module.run_cli(p.parse_args(argv), argv, p)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: {USAGE}\n\n{catalog.listing()}")
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name == "list":
        print(catalog.markdown_table() if rest == ["--markdown"] else catalog.listing())
        return 0
    if name == "report":
        import bench.lib.report as report

        return report.main(rest) or 0
    if name not in catalog.BY_NAME:
        print(f"unknown study {name!r}; `python -m bench list` prints the studies", file=sys.stderr)
        return 2
    res = run(name, rest)
    return res if isinstance(res, int) else 0  # some studies return their results


if __name__ == "__main__":
    sys.exit(main())
