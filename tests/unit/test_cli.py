"""`teola` command-line tests on deterministic in-process engines (no real engines start)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from apps.advanced_rag import build as build_advanced_rag
from engines.sim.sim_engine import SimEngine
from teola import App, Engine, Node
from teola.cli import main
from teola.server.loading import AppNotFound, resolve_app
from teola.trace.table import timing_table


@pytest.fixture(autouse=True)
def fresh_library_loggers(monkeypatch):
    """The library loggers the apps below write to ("transformers.fake", "vllm.fake_engine") as they
    are in a fresh `teola` process. A test that imported vLLM or transformers earlier in this
    process (engines/test_models.py's doctor) leaves their library loggers not propagating and
    writing to the stderr that pytest captured for that earlier test."""
    for name in ("transformers", "vllm"):
        logger = logging.getLogger(name)
        monkeypatch.setattr(logger, "propagate", True)
        monkeypatch.setattr(logger, "handlers", [])


def sim_rag() -> App:
    """advanced_rag with sim engines (used as `tests.unit.test_cli:sim_rag`)."""
    app = build_advanced_rag()
    for name, spec in list(app.engines.items()):
        app.register_engine(Engine(name, kind=spec.kind, **spec.options), backend=SimEngine(name))
    return app


def sim_echo() -> App:
    app = App("echo")
    app.register_engine(Engine("llm", kind="vllm"), backend=SimEngine("llm"))
    app.update_template(
        [
            Node(
                "llm",
                name="answer",
                engine="llm",
                config={
                    "parts": [["instruction", "Answer."], ["question", "$query.question"]],
                    "max_tokens": 8,
                },
            )
        ]
    )
    return app


def noisy_sim_echo() -> App:
    """sim_echo, built after the kind of output vLLM, torch and transformers produce: a library logger's
    warning, a Python warning, a print, a raw write to fd 2 (C++) and a child process writing to its fd 2
    (an engine-core process); plus one teola warning (used as `tests.unit.test_cli:noisy_sim_echo`)."""
    logging.getLogger("vllm.fake_engine").warning("NOISE-library-logger")
    warnings.warn("NOISE-python-warning", UserWarning)  # noqa: B028  (where it points is not the test)
    print("NOISE-print-stdout")
    os.write(2, b"NOISE-raw-fd2\n")
    subprocess.run([sys.executable, "-c", "import os; os.write(2, b'NOISE-child-fd2\\n')"], check=True)
    logging.getLogger("teola.test").warning("teola-own-warning")
    return sim_echo()


ECHO_INSTANCE = sim_echo()
NOT_AN_APP = 42


def test_compile_prints_egraph_text(capsys):
    assert main(["compile", "advanced_rag"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("%0 = ") and "llm.prefilling" in out and "return " in out


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


def test_run_serves_queries_and_prints_timings(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TEOLA_CACHE_DIR", str(tmp_path))  # the run's log file goes there
    assert main(["run", "tests.unit.test_cli:sim_rag"]) == 0
    captured = capsys.readouterr()
    assert "Answer:" in captured.out
    header = captured.out.split("latency")[1]
    for column in ("op", "component", "queued", "started", "finished", "batch", "cached tok"):
        assert column in header
    assert "prefilling" in captured.out and "synthesis" in captured.out
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
    monkeypatch.setitem(sys.modules, "engines.tuning.setup_cli", None)
    assert main(["doctor"]) == 2
    assert "setup_cli" in capsys.readouterr().err


def test_bench_unknown_suite(capsys):
    assert main(["bench", "no_such_suite"]) == 2
    err = capsys.readouterr().err
    assert "sim_fidelity" in err and "compile" in err and "report" in err  # the studies of bench's table
    assert "common" not in err  # library modules are not


def test_timing_table():
    trace = [
        {
            "primitive": "synthesis.call0.decode",
            "op": "decoding",
            "engine": "llm",
            "queued": 0.001,
            "started": 0.002,
            "finished": 0.0125,
            "batch_size": 2,
            "num_cached_tokens": 64,
        },
        {
            "primitive": "need_search",
            "op": "condition",
            "engine": None,
            "queued": 0.0,
            "started": None,
            "finished": 0.0,
            "batch_size": None,
        },
    ]
    lines = timing_table(trace).splitlines()
    assert lines[0].split()[:3] == ["op", "component", "engine"]
    assert lines[2].split()[:2] == ["condition", "need_search"]
    assert lines[3].split() == ["decoding", "synthesis", "llm", "1.0", "2.0", "12.5", "10.5", "2", "64"]


def test_simulate_prints_simulated_latency_for_a_shipped_profile(capsys):
    assert (
        main(
            [
                "simulate",
                "naive_rag",
                "--profile",
                "a100-llama2-7b",
                "--rate",
                "5",
                "--queries",
                "6",
                "--instances",
                "llm=2",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["queries"] == 6 and out["failed"] == 0 and out["provenance"] == "derived"
    assert out["mean_s"] > 0 and {"llm/0", "llm/1"} <= set(out["utilisation"])


def test_simulate_several_rates_writes_a_plot(capsys, tmp_path):
    png = tmp_path / "sim.png"
    assert (
        main(
            [
                "simulate",
                "naive_rag",
                "--profile",
                "a100-llama2-7b",
                "--rate",
                "2,8",
                "--queries",
                "6",
                "--plot",
                str(png),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.count("simulated (") == 2 and "Poisson 2 q/s" in out and "Poisson 8 q/s" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_simulation_breakdown_sums_each_engines_queued_and_running_time():
    from teola.sim.run import add_breakdown

    acc = {}
    add_breakdown(
        acc,
        [
            {"engine": "llm", "queued": 0.0, "started": 0.5, "finished": 2.0},
            {"engine": "llm", "queued": 1.0, "started": 1.0, "finished": 1.5},
            {"engine": None, "queued": 2.0, "started": 2.0, "finished": 2.0},
            {"engine": "embedding", "queued": 0.0, "started": None, "finished": None},
        ],
    )
    assert acc == {"llm": [0.5, 2.0]}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--profile", "no-such"], "not found"),
        (["--profile", "a100-llama2-7b", "--rate", "1,-2"], "must be > 0"),
        (["--profile", "a100-llama2-7b", "--plot", "x.svg"], "ending in .png"),
        (["--profile", "a100-llama2-7b", "--instances", "llm=0"], "engine=count"),
        (["--profile", "a100-llama2-7b", "--instances", "gpu=2"], "does not have"),
        (["--profile", "a100-llama2-7b", "--passes", "{bad"], "--passes must be JSON"),
    ],
)
def test_simulate_usage_mistakes_are_named(capsys, argv, message):
    assert main(["simulate", "naive_rag", "--queries", "2", *argv]) == 2
    assert message in capsys.readouterr().err


# ---- where library output goes (teola/cli_logging.py) ----------------------------------------------
FD_NOISE = ("NOISE-print-stdout", "NOISE-raw-fd2", "NOISE-child-fd2")
NOISE = ("NOISE-library-logger", *FD_NOISE)


def only_log(tmp_path: Path) -> Path:
    logs = list((tmp_path / "logs").glob("run-*.log"))
    assert len(logs) == 1, logs
    return logs[0]


def test_run_sends_library_output_to_a_log_file(capfd, monkeypatch, tmp_path):
    monkeypatch.setenv("TEOLA_CACHE_DIR", str(tmp_path))
    assert main(["run", "tests.unit.test_cli:noisy_sim_echo"]) == 0
    out, err = capfd.readouterr()
    log = only_log(tmp_path)
    assert "Answer:" in out and "cached tok" in out and "Timeline:" in out
    assert f"goes to {log}" in err.splitlines()[0] and "server ready" in err and "stopped" in err
    assert "[teola.test] WARNING: teola-own-warning" in err  # teola's own warnings stay on the terminal
    for noise in NOISE:
        assert noise not in out + err
    text = log.read_text()
    for noise in NOISE:
        assert noise in text
    assert "WARNING vllm.fake_engine: NOISE-library-logger" in text
    os.write(2, b"after the run\n")  # descriptor 2 is the terminal again
    assert capfd.readouterr().err == "after the run\n" and "after the run" not in log.read_text()


@pytest.mark.filterwarnings("ignore:NOISE-python-warning")
def test_run_verbose_keeps_library_output_on_the_terminal(capfd, monkeypatch, tmp_path):
    monkeypatch.setenv("TEOLA_CACHE_DIR", str(tmp_path))
    assert main(["run", "tests.unit.test_cli:noisy_sim_echo", "--verbose"]) == 0
    out, err = capfd.readouterr()
    assert "Answer:" in out and "goes to" not in err
    for noise in FD_NOISE:  # (the logger's record goes to pytest's log capture, as there is a root handler)
        assert noise in out + err
    assert not list(tmp_path.glob("logs/*.log"))


def test_failed_run_prints_the_error_then_the_end_of_the_log(capfd, monkeypatch, tmp_path):
    monkeypatch.setenv("TEOLA_CACHE_DIR", str(tmp_path))
    assert main(["run", "tests.unit.test_cli:noisy_sim_echo", "--config", '{"passes": {"nope": true}}']) == 1
    err = capfd.readouterr().err
    error = err.index("teola: error: query failed with HTTP 422")
    tail = err.index(f"the end of the log {only_log(tmp_path)}")
    assert error < tail and err.index("NOISE-child-fd2") > tail and err.index("NOISE-library-logger") > tail


def broken_app() -> App:
    logging.getLogger("transformers.fake").error("NOISE-before-the-crash")
    raise RuntimeError("engine start-up crashed")


def test_an_unexpected_exception_propagates_after_the_end_of_the_log(capfd, monkeypatch, tmp_path):
    monkeypatch.setenv("TEOLA_CACHE_DIR", str(tmp_path))
    with pytest.raises(RuntimeError, match="start-up crashed"):
        main(["run", "tests.unit.test_cli:broken_app"])
    err = capfd.readouterr().err
    assert "the end of the log" in err and "NOISE-before-the-crash" in err


def test_run_in_a_real_process_keeps_the_terminal_to_teola(tmp_path):
    """The `make run` case: stdout and stderr are the process's real descriptors 1 and 2."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TEOLA_CACHE_DIR": str(tmp_path), "PYTHONWARNINGS": "default"}
    done = subprocess.run(
        [sys.executable, "-m", "teola.cli", "run", "tests.unit.test_cli:noisy_sim_echo"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Answer:" in done.stdout and "teola-own-warning" in done.stderr
    for noise in (*NOISE, "NOISE-python-warning"):
        assert noise not in done.stdout + done.stderr
    text = only_log(tmp_path).read_text()
    for noise in (*NOISE, "NOISE-python-warning"):
        assert noise in text
    assert [ln for ln in done.stderr.splitlines() if not ln.startswith("[teola")] == []


def test_log_tail_shows_the_last_state_of_a_progress_bar(tmp_path):
    from teola.cli_logging import tail

    log = tmp_path / "x.log"
    log.write_text("one\n\nloading  10%\rloading  50%\rloading 100%\r\ntwo\n")
    assert tail(log) == ["one", "loading 100%", "two"] and tail(log, 1) == ["two"]
    assert tail(tmp_path / "missing.log") == []
