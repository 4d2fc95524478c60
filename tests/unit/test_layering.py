"""The product's layering, checked on the source: every import in teola/ and engines/ (module level
and inside functions) between two packages is one that the layer table (tests/support/layers.py)
declares for the importing package, and every declaration is used; nothing in the product imports
bench, tests or apps; code outside teola/runtime reaches the runtime only through `teola.runtime`'s
public names; docs/architecture.md shows the table as declared; files and functions stay small."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

import tests.support.layers as layers

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("teola", "engines")
FORBIDDEN_TOPS = ("bench", "tests", "apps")
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
TABLE = "tests/support/layers.py"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import; `from a import b` also yields `a.b` when `a/b`
    is a module or package, so importing a submodule by name is seen."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            base = ROOT.joinpath(*node.module.split("."))
            for a in node.names:
                if (base / f"{a.name}.py").is_file() or (base / a.name / "__init__.py").is_file():
                    out.append((node.lineno, f"{node.module}.{a.name}"))
    return out


def product_files() -> list[Path]:
    return sorted(p for top in PRODUCT for p in (ROOT / top).rglob("*.py"))


def package_edges(path: Path) -> list[tuple[int, str, layers.Package, layers.Package | None]]:
    """(line, imported module, importer's package, imported module's package) for every import of
    teola or engines from `path` that leaves the importer's package."""
    me = layers.package_of(module_name(path))
    out: list[tuple[int, str, layers.Package, layers.Package | None]] = []
    if me is None:
        return out
    for line, mod in imports_of(path):
        if mod.split(".")[0] in PRODUCT and not me.holds(mod):
            out.append((line, mod, me, layers.package_of(mod)))
    return out


def violations(path: Path) -> list[str]:
    me = module_name(path)
    inside_runtime = me == "teola.runtime" or me.startswith("teola.runtime.")
    found = []
    if layers.package_of(me) is None:
        found.append(f"{path.relative_to(ROOT)}: {me} is in no package of {TABLE}; add it there")
    for line, mod in imports_of(path):
        top = mod.split(".")[0]
        if top in FORBIDDEN_TOPS:
            found.append(f"{path.relative_to(ROOT)}:{line} imports {mod}: the product may not import {top}/")
    for line, mod, pkg, theirs in package_edges(path):
        where = f"{path.relative_to(ROOT)}:{line} imports {mod}"
        if theirs is None:
            found.append(f"{where}: {mod} is in no package of {TABLE}")
        elif not pkg.allows(theirs.name):
            kind = "upward" if theirs.layer > pkg.layer else "undeclared"
            found.append(
                f"{where}: {kind} ({pkg.name}, layer {pkg.layer}, may not import {theirs.name}, "
                f"layer {theirs.layer}; declare it in {TABLE} if it belongs there)"
            )
        if mod.startswith("teola.runtime.") and not inside_runtime:
            found.append(f"{where}: private runtime module; use the names `teola.runtime` exports")
    return found


def test_no_upward_bench_tests_apps_or_private_runtime_imports():
    found = [v for p in product_files() for v in violations(p)]
    assert not found, "layering violations:\n" + "\n".join(found)


def test_every_declared_import_is_used():
    """The table says what is, not what might be: a declaration no import uses is stale."""
    used = {
        (pkg.name, theirs.name)
        for p in product_files()
        for _, _, pkg, theirs in package_edges(p)
        if theirs is not None
    }
    stale = [
        f"{pkg.name} -> {decl}"
        for pkg in layers.PACKAGES
        for decl in pkg.may_import
        if not any(a == pkg.name and layers.matches(decl, b) for a, b in used)
    ]
    assert not stale, f"declared in {TABLE} but imported nowhere (remove them):\n" + "\n".join(stale)


def test_the_table_points_down_without_cycles():
    by_name = {p.name: p for p in layers.PACKAGES}
    assert len(by_name) == len(layers.PACKAGES), "a package is declared twice"
    g = nx.DiGraph()
    bad = []
    for pkg in layers.PACKAGES:
        targets = [q for q in layers.PACKAGES if q is not pkg and pkg.allows(q.name)]
        bad += [
            f"{pkg.name} -> {d}: no such package"
            for d in pkg.may_import
            if not any(layers.matches(d, q.name) for q in layers.PACKAGES)
        ]
        bad += [
            f"{pkg.name} (layer {pkg.layer}) -> {q.name} (layer {q.layer}): upward"
            for q in targets
            if q.layer > pkg.layer
        ]
        g.add_edges_from((pkg.name, q.name) for q in targets)
    bad += [" -> ".join(c) for c in nx.simple_cycles(g)]
    assert not bad, f"{TABLE}:\n" + "\n".join(bad)


def test_the_architecture_doc_shows_the_table():
    text = layers.DOC.read_text(encoding="utf-8")
    assert layers.doc_with_table(text) == text, (
        f"docs/architecture.md's layer table differs from {TABLE}: "
        "run `.venv/bin/python -m tests.support.layers` and commit the doc"
    )


def test_the_check_catches_each_kind_of_violation(tmp_path):
    """The walker itself: each forbidden import in a throwaway module is reported."""
    bad = {
        "engines/vllm/bad.py": "from teola.ir.graph import Graph\n",
        "teola/ir/bad.py": "def f():\n    import bench.rag\n    from teola.server import api\n",
        "teola/loaders/bad.py": "import teola.ir.graph\n",
        "teola/stray.py": "",
        "teola/api/app_bad.py": "from teola.runtime.graph_tier.graph_scheduler import QueryRun\n",
    }
    global ROOT
    old_root, ROOT = ROOT, tmp_path
    try:
        for rel, text in bad.items():
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
        (tmp_path / "teola/runtime/graph_tier").mkdir(parents=True, exist_ok=True)
        (tmp_path / "teola/runtime/graph_tier/graph_scheduler.py").write_text("")
        msgs = {rel: violations(tmp_path / rel) for rel in bad}
    finally:
        ROOT = old_root
    assert any("upward" in m and "may not import teola.ir" in m for m in msgs["engines/vllm/bad.py"])
    assert any("may not import bench" in m for m in msgs["teola/ir/bad.py"])
    assert any("upward" in m and "teola.server" in m for m in msgs["teola/ir/bad.py"])
    assert any("undeclared" in m and "teola.loaders" in m for m in msgs["teola/loaders/bad.py"])
    assert any("in no package" in m for m in msgs["teola/stray.py"])
    assert any("private runtime module" in m for m in msgs["teola/api/app_bad.py"])
    assert not [m for m in msgs["teola/api/app_bad.py"] if "private" not in m]


@pytest.mark.parametrize("top", PRODUCT)
def test_files_and_functions_stay_small(top):
    big_files, big_funcs = [], []
    for path in sorted((ROOT / top).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_FILE_LINES:
            big_files.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    big_funcs.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    assert not big_files, f"files over {MAX_FILE_LINES} lines: {big_files}"
    assert not big_funcs, f"functions over {MAX_FUNCTION_LINES} lines: {big_funcs}"


def import_graph(files: list[Path]) -> nx.DiGraph:
    """Modules of the product as nodes, every import between two of them as an edge (imports under
    `TYPE_CHECKING` and inside functions count: a cycle hidden there is still a cycle of design)."""
    known = {module_name(p) for p in files}
    g = nx.DiGraph()
    g.add_nodes_from(known)
    for p in files:
        me = module_name(p)
        for _, mod in imports_of(p):
            if mod in known and mod != me:
                g.add_edge(me, mod)
    return g


def test_no_import_cycles():
    cycles = sorted(" -> ".join(c + [c[0]]) for c in nx.simple_cycles(import_graph(product_files())))
    assert not cycles, "import cycles:\n" + "\n".join(cycles[:20])


def test_the_cycle_check_sees_type_checking_imports(tmp_path):
    global ROOT
    old_root, ROOT = ROOT, tmp_path
    try:
        (tmp_path / "teola").mkdir()
        a, b = tmp_path / "teola/a.py", tmp_path / "teola/b.py"
        a.write_text("from teola.b import x\n")
        b.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from teola.a import y\n")
        assert list(nx.simple_cycles(import_graph([a, b])))
    finally:
        ROOT = old_root


def private_imports(path: Path) -> list[str]:
    """`from other.package import _private` where the module is not in the importer's own package."""
    me = module_name(path)
    my_pkg = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            their_pkg = (
                node.module
                if (ROOT.joinpath(*node.module.split(".")) / "__init__.py").is_file()
                else node.module.rpartition(".")[0]
            )
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__") and their_pkg != my_pkg:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}.{a.name}")
    return found


def test_no_private_names_taken_from_another_package():
    found = [v for p in product_files() for v in private_imports(p)]
    assert not found, "private names used outside their package:\n" + "\n".join(found)


def policy_probes(path: Path) -> list[str]:
    """getattr / hasattr on a policy: a policy declares its hooks (teola.scheduling.base.Policy)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and node.args
            and "polic" in ast.unparse(node.args[0]).lower()
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    return found


def test_policies_are_never_probed_for_hooks():
    found = [v for p in product_files() for v in policy_probes(p)]
    assert not found, "policies probed with getattr/hasattr:\n" + "\n".join(found)


def work_methods_in_doc(text: str) -> list[str]:
    """The method names docs/architecture.md lists for the engine tier's `Work` protocol."""
    head = text.index("the `Work` protocol (") + len("the `Work` protocol (")
    return [name.strip().strip("`") for name in text[head : text.index(")", head)].split(",")]


def test_the_architecture_doc_lists_every_method_of_work():
    tree = ast.parse((ROOT / "teola/runtime/engine_tier/work.py").read_text(encoding="utf-8"))
    work = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Work")
    methods = [n.name for n in work.body if isinstance(n, ast.FunctionDef)]
    doc = work_methods_in_doc(layers.DOC.read_text(encoding="utf-8"))
    assert doc == methods, f"docs/architecture.md lists Work's methods as {doc}; the protocol has {methods}"
