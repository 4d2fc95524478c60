"""Every engine request field has one default, defined once (engines.requests.REQUEST_DEFAULTS):
no layer writes a default of its own for such a field, and what each layer sends or assumes for a
field left out is the table's value."""

import ast
from pathlib import Path

from engines.requests import REQUEST_DEFAULTS, PrimOp
from teola.compile.components.options import SearchOptions
from teola.ir.generation import DEFAULT_GEN
from teola.ir.primitive import Primitive
from teola.runtime.requests import build_requests, llm_request

ROOT = Path(__file__).resolve().parents[2]
# `.get(field, x)` on something that is not an engine request: the query's own config (its
# `priority` is the query's), an OpenAI API body (OpenAI's own default temperature is 1.0), and the
# planner's job file (its models' max_tokens).
NOT_REQUESTS = {
    ("teola/runtime/options.py", "config"),
    ("teola/runtime/graph_tier/graph_scheduler.py", "config"),
    ("teola/server/openai/format.py", "body"),
    ("teola/plan/job.py", "m"),
    ("teola/sim/profiler.py", "lengths"),
}


def literal_defaults() -> list[str]:
    found = []
    for top in ("teola", "engines"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute)
                    and n.func.attr in ("get", "pop", "setdefault")
                    and len(n.args) == 2
                    and isinstance(n.args[0], ast.Constant)
                    and n.args[0].value in REQUEST_DEFAULTS
                    and (rel, ast.unparse(n.func.value)) not in NOT_REQUESTS
                ):
                    found.append(f"{rel}:{n.lineno} {ast.unparse(n)}")
    return found


def test_no_layer_writes_its_own_default_for_a_request_field():
    found = literal_defaults()
    assert not found, (
        "request field defaults written outside engines.requests (use default(req, name)):\n"
        + "\n".join(found)
    )


def test_the_runtime_sends_the_tables_defaults():
    req = llm_request([["question", "q"]], True, {})
    for name in ("max_tokens", "temperature", "stop", "split"):  # priority: the dispatch record's
        assert req[name] == REQUEST_DEFAULTS[name], name
    assert {k: REQUEST_DEFAULTS[k] for k in DEFAULT_GEN} == DEFAULT_GEN
    search = Primitive(
        PrimOp.SEARCHING, "vectordb", "search", inputs=("q",), outputs=("r",), args={"map": ("q",)}
    )
    values = {"q": [[0.1, 0.2]], "sys.namespace": "ns"}
    assert [r["top_k"] for r in build_requests(search, values)] == [REQUEST_DEFAULTS["top_k"]]


def test_the_search_components_default_is_the_tables():
    assert f"default {REQUEST_DEFAULTS['top_k']}" in SearchOptions.model_fields["top_k"].description


def test_the_llm_engines_fill_a_missing_field_from_the_table():
    from engines.llm_text.llm_requests import check_request

    req = check_request("decoding", {"parts": [["question", "q"]], "max_tokens": 4}, 16)
    for name in (
        "complete",
        "temperature",
        "stop",
        "priority",
        "split",
        "ignore_eos",
        "stream_text",
        "progress",
    ):
        assert req[name] == REQUEST_DEFAULTS[name], name


def test_the_check_sees_a_literal_default(tmp_path):
    (tmp_path / "engines").mkdir()
    (tmp_path / "teola").mkdir()
    (tmp_path / "engines/bad.py").write_text("def f(req):\n    return req.get('top_k', 5)\n")
    global ROOT
    old, ROOT = ROOT, tmp_path
    try:
        assert literal_defaults() == ["engines/bad.py:2 req.get('top_k', 5)"]
    finally:
        ROOT = old
