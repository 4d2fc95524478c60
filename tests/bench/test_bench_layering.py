"""The product's caps and private-import rule applied to bench/: files of at most 400 lines, functions
of at most 60, no private name (`from pkg import _name`) or private module (`engines.x._native`) taken
from another package. Today's offenders are listed below with their size; the list may only shrink: a
new offender or a listed one that grew fails the test (take an entry off once it is fixed)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import tests.unit.test_layering as rules

ROOT = rules.ROOT
BENCH = ROOT / "bench"
# path -> lines: files over the cap, to be split along what they hold
BIG_FILES: dict[str, int] = {}
# path::function -> lines
BIG_FUNCTIONS: dict[str, int] = {}
# "path: module.name" of private names and modules taken from another package
PRIVATE = {
    "bench/studies/sim/cost_forms.py: teola.sim.profiler._prose",
    "bench/studies/sim/step_shape.py: teola.sim.profiler._prose",
    "bench/studies/sim/step_shape.py: teola.sim.profiler._reset",
    "bench/studies/sim/step_shape.py: teola.sim.profiler._timed_steps",
    "bench/studies/kv/kv_swap.py: engines.kvswap._native",
    "bench/studies/kv/kv_swap.py: engines.kvswap._native.kv_fallback",
    "bench/studies/kv/kv_swap.py: engines.kvswap._native.kv_layout",
}


def bench_files() -> list[Path]:
    return sorted(BENCH.rglob("*.py"))


def sizes() -> tuple[dict[str, int], dict[str, int]]:
    """Files over 400 lines and functions over 60 in bench/, with their lines."""
    files, functions = {}, {}
    for path in bench_files():
        text, rel = path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))
        if text.count("\n") > rules.MAX_FILE_LINES:
            files[rel] = text.count("\n")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > rules.MAX_FUNCTION_LINES:
                    functions[f"{rel}::{node.name}"] = max(n, functions.get(f"{rel}::{node.name}", 0))
    return files, functions


def private_uses(path: Path) -> set[str]:
    """`path: module.name` for a private name of another package, `path: module` for a private module."""
    rel = str(path.relative_to(ROOT))
    found = {f"{rel}: {v.split(' imports ')[1]}" for v in rules.private_imports(path)}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module]
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
            else []
        )
        found |= {
            f"{rel}: {m}"
            for m in names
            if any(c.startswith("_") and not c.startswith("__") for c in m.split("."))
        }
    return found


def test_files_stay_under_the_cap_and_the_offenders_only_shrink():
    files, _ = sizes()
    assert set(files) <= set(BIG_FILES), (
        f"new files over {rules.MAX_FILE_LINES} lines: {set(files) - set(BIG_FILES)}"
    )
    grown = {f: n for f, n in files.items() if n > BIG_FILES[f]}
    assert not grown, f"listed files that grew: {grown}"


def test_functions_stay_under_the_cap_and_the_offenders_only_shrink():
    _, functions = sizes()
    new = set(functions) - set(BIG_FUNCTIONS)
    assert not new, f"new functions over {rules.MAX_FUNCTION_LINES} lines: {new}"
    grown = {f: n for f, n in functions.items() if n > BIG_FUNCTIONS[f]}
    assert not grown, f"listed functions that grew: {grown}"


def test_no_new_private_imports_and_the_listed_ones_only_go():
    found = set().union(*(private_uses(p) for p in bench_files()))
    assert found <= PRIVATE, f"private names or modules of another package: {sorted(found - PRIVATE)}"


def test_the_private_check_sees_names_and_modules(tmp_path, monkeypatch):
    (tmp_path / "bench" / "a").mkdir(parents=True)
    (tmp_path / "bench" / "a" / "__init__.py").write_text("")
    bad = tmp_path / "bench" / "a" / "bad.py"
    bad.write_text("from bench.b import _x, y\nimport engines.k._native.f\nfrom bench.a.c import _ok\n")
    (tmp_path / "bench" / "b.py").write_text("")
    monkeypatch.setattr(rules, "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = {v.split(": ", 1)[1] for v in private_uses(bad)}
    assert found == {"bench.b._x", "engines.k._native.f"}
