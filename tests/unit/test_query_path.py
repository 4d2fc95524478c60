"""scripts/query_path.py: the runtime files one simulated query passes through, in order."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "query_path.py"


def load():
    spec = importlib.util.spec_from_file_location("query_path", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_path_runs_through_both_tiers_and_only_the_named_packages():
    path = load().trace_path("naive_rag", "a100-llama2-7b", ["teola/runtime"])
    assert all(p.startswith("teola/runtime/") for p in path)
    assert all(a != b for a, b in zip(path, path[1:])), "consecutive repeats collapse"
    files = set(path)
    assert {
        "teola/runtime/runtime.py",
        "teola/runtime/graph_tier/graph_scheduler.py",
        "teola/runtime/engine_tier/engine_scheduler.py",
    } <= files
    assert len(path) > len(files), "a query comes back to the schedulers more than once"


def test_the_report_counts_returns_as_entries_less_files(capsys):
    assert load().main(["--app", "naive_rag", "--packages", "teola/runtime", "--top", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    counts = dict(part.strip().rsplit(" ", 1) for part in out[1].split(","))
    assert int(counts["returns to a file already left"]) == int(counts["entries"]) - int(counts["files"])
    assert len(out) == 4, "two files listed under --top 2"
