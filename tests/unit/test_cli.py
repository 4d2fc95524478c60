"""`teola` command-line tests on deterministic in-process engines (no real engines start)."""
from __future__ import annotations

import json
import sys

import pytest

from apps.advanced_rag import build as build_advanced_rag
from teola import App, Engine, Node
from teola.cli import main, timing_table
from teola.server.loading import AppNotFound, resolve_app
from engines.sim.sim_engine import SimEngine


def sim_rag() -> App:
    """advanced_rag with sim engines (used as `tests.unit.test_cli:sim_rag`)."""
    app = build_advanced_rag()
    for name, spec in list(app.engines.items()):
        app.register_engine(Engine(name, kind=spec.kind, **spec.options), backend=SimEngine(name))
    return app


def sim_echo() -> App:
    app = App("echo")
    app.register_engine(Engine("llm", kind="vllm"), backend=SimEngine("llm"))
    app.update_template([Node("llm", name="answer", engine="llm", config={
        "parts": [["instruction", "Answer."], ["question", "$query.question"]], "max_tokens": 8})])
    return app


ECHO_INSTANCE = sim_echo()
NOT_AN_APP = 42


def test_compile_prints_egraph_text(capsys):
    assert main(["compile", "advanced_rag"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("%0 = ") and "partial_prefilling" in out and "return " in out


@pytest.mark.parametrize("fmt, marker", [("dot", "digraph"), ("mermaid", "flowchart")])
def test_compile_formats(capsys, fmt, marker):
    assert main(["compile", "naive_rag", "--format", fmt]) == 0
    assert marker in capsys.readouterr().out


def test_compile_bad_config_is_usage_error(capsys):
    assert main(["compile", "naive_rag", "--config", '{"passes": {"nope": true}}']) == 2
    assert "nope" in capsys.readouterr().err


def test_unknown_app_lists_builtin_apps(capsys):
    assert main(["compile", "no_such_app"]) == 2
    err = capsys.readouterr().err
    assert "no_such_app" in err
    for name in ("advanced_rag", "naive_rag", "search_generation", "tool_agent"):
        assert name in err


def test_resolve_module_attr():
    assert resolve_app("tests.unit.test_cli:ECHO_INSTANCE") is ECHO_INSTANCE
    assert resolve_app("tests.unit.test_cli:sim_echo").name == "echo"
    with pytest.raises(TypeError, match="not an App"):
        resolve_app("tests.unit.test_cli:NOT_AN_APP")
    with pytest.raises(AppNotFound, match="no attribute"):
        resolve_app("tests.unit.test_cli:missing")
    with pytest.raises(AppNotFound, match="cannot import"):
        resolve_app("no.such.module:app")


def test_run_serves_queries_and_prints_timings(capsys):
    assert main(["run", "tests.unit.test_cli:sim_rag"]) == 0
    captured = capsys.readouterr()
    assert "Answer:" in captured.out
    header = captured.out.split("latency")[1]
    for column in ("op", "component", "queued", "started", "finished", "batch", "cached tok"):
        assert column in header
    assert "partial_prefilling" in captured.out and "synthesis" in captured.out
    assert "server ready" in captured.err and "stopped" in captured.err
    timeline = captured.out.split("Timeline:\n")[1].splitlines()
    assert {"llm:", "embedding:", "vectordb:", "reranker:"} <= set(timeline)
    bars = [ln for ln in timeline if ln.count("|") == 2 and not ln.startswith(" " * 10)]
    assert any(ln.startswith("* synthesis.") for ln in bars)  # the answer's decode ends the critical path


def test_query_in_process(capsys):
    assert main(["query", "tests.unit.test_cli:sim_echo", "--in-process", "-q", "Why?", "--json"]) == 0
    assert '"output": "answer ' in capsys.readouterr().out


def test_query_unreachable_server(capsys):
    assert main(["query", "echo", "-q", "hi", "--url", "http://127.0.0.1:9"]) == 1
    assert "cannot reach the server" in capsys.readouterr().err


def test_setup_without_engines_module(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "engines.setup_cli", None)
    assert main(["doctor"]) == 2
    assert "setup_cli" in capsys.readouterr().err


def test_bench_unknown_suite(capsys):
    assert main(["bench", "no_such_suite"]) == 2
    assert "compile" in capsys.readouterr().err


def test_timing_table():
    trace = [{"primitive": "synthesis.call0.decode", "op": "decoding", "engine": "llm", "queued": 0.001,
              "started": 0.002, "finished": 0.0125, "batch_size": 2, "num_cached_tokens": 64},
             {"primitive": "need_search", "op": "condition", "engine": None, "queued": 0.0, "started": None,
              "finished": 0.0, "batch_size": None}]
    lines = timing_table(trace).splitlines()
    assert lines[0].split()[:3] == ["op", "component", "engine"]
    assert lines[2].split()[:2] == ["condition", "need_search"]
    assert lines[3].split() == ["decoding", "synthesis", "llm", "1.0", "2.0", "12.5", "10.5", "2", "64"]


def test_simulate_prints_simulated_latency_for_a_shipped_profile(capsys):
    assert main(["simulate", "naive_rag", "--profile", "a100-llama2-7b", "--rate", "5", "--queries", "6",
                 "--instances", "llm=2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queries"] == 6 and out["failed"] == 0 and out["provenance"] == "derived"
    assert out["mean_s"] > 0 and {"llm/0", "llm/1"} <= set(out["utilisation"])


def test_simulate_several_rates_writes_a_plot(capsys, tmp_path):
    png = tmp_path / "sim.png"
    assert main(["simulate", "naive_rag", "--profile", "a100-llama2-7b", "--rate", "2,8", "--queries", "6",
                 "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert out.count("simulated (") == 2 and "Poisson 2 q/s" in out and "Poisson 8 q/s" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_simulation_breakdown_sums_each_engines_queued_and_running_time():
    from teola.sim.run import add_breakdown
    acc = {}
    add_breakdown(acc, [{"engine": "llm", "queued": 0.0, "started": 0.5, "finished": 2.0},
                        {"engine": "llm", "queued": 1.0, "started": 1.0, "finished": 1.5},
                        {"engine": None, "queued": 2.0, "started": 2.0, "finished": 2.0},
                        {"engine": "embedding", "queued": 0.0, "started": None, "finished": None}])
    assert acc == {"llm": [0.5, 2.0]}


@pytest.mark.parametrize("argv, message", [
    (["--profile", "no-such"], "not found"),
    (["--profile", "a100-llama2-7b", "--rate", "1,-2"], "must be > 0"),
    (["--profile", "a100-llama2-7b", "--plot", "x.svg"], "ending in .png"),
    (["--profile", "a100-llama2-7b", "--instances", "llm=0"], "engine=count"),
    (["--profile", "a100-llama2-7b", "--instances", "gpu=2"], "does not have"),
    (["--profile", "a100-llama2-7b", "--passes", "{bad"], "--passes must be JSON"),
])
def test_simulate_usage_mistakes_are_named(capsys, argv, message):
    assert main(["simulate", "naive_rag", "--queries", "2", *argv]) == 2
    assert message in capsys.readouterr().err
