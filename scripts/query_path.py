"""The path one query takes through the runtime, as a newcomer reading the code would follow it: the
files of the named packages that control passes through, how many times it enters each, and how many
of those entries come back to a file it had already left.

One query of an app (default: advanced RAG) runs on simulated engines (a shipped profile, no model
needed) in virtual time. Every Python call and return (coroutines resuming count as calls) is seen
through sys.setprofile; the file of the running function is kept when it is in one of the packages,
consecutive repeats collapse, and what is left is the path: entries = its length, files = the distinct
files on it, returns = entries - files (each entry into a file seen before). Only the named packages'
files count: with the default, compile and the passes are not on the path, the runtime's tiers and the
scheduling policies are.

Usage: .venv/bin/python scripts/query_path.py [--app advanced_rag] [--profile a100-llama2-7b]
           [--packages teola/runtime,teola/scheduling] [--top 15]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def trace_path(app_name: str, profile: str, packages: list[str]) -> list[str]:
    """The collapsed sequence of package files one query of `app_name` runs through."""
    from teola.server.loading import resolve_app
    from teola.sim.run import use_profile
    from teola.sim.virtual_loop import run_virtual

    prefixes = tuple(str(ROOT / p) + "/" for p in packages)
    path: list[str] = []

    def seen(frame: FrameType, event: str, _arg: Any) -> None:
        if event not in ("call", "return"):
            return
        f = frame if event == "call" else frame.f_back
        name = f.f_code.co_filename if f is not None else ""
        if name.startswith(prefixes) and (not path or path[-1] != name):
            path.append(name)

    async def one_query() -> None:
        app = resolve_app(app_name)
        use_profile(app, profile, None)
        await app.start()
        try:
            query, _ = app.sample()
            sys.setprofile(seen)
            try:
                await app.run(query)
            finally:
                sys.setprofile(None)
        finally:
            await app.stop()

    run_virtual(one_query())
    return [str(Path(p).relative_to(ROOT)) for p in path]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--app", default="advanced_rag")
    p.add_argument("--profile", default="a100-llama2-7b", help="a shipped simulation profile")
    p.add_argument(
        "--packages",
        default="teola/runtime,teola/scheduling",
        help="comma-separated folders whose files make up the path",
    )
    p.add_argument("--top", type=int, default=15, help="files listed by entries")
    args = p.parse_args(argv)
    path = trace_path(
        args.app, args.profile, [x.strip().rstrip("/") for x in args.packages.split(",") if x.strip()]
    )
    entries = Counter(path)
    print(f"{args.app}, one query on simulated engines ({args.profile}), packages {args.packages}:")
    print(
        f"files {len(entries)}, entries {len(path)}, "
        f"returns to a file already left {len(path) - len(entries)}"
    )
    for name, n in entries.most_common(args.top):
        print(f"{n:6d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
