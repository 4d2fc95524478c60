"""bench/rag.py without engines: speedups over trials, verdicts, the report, and the LlamaIndex
system being skipped (not crashing) when llama-index-core cannot be imported."""
from __future__ import annotations

import sys

import pytest

from bench.rag import (
    Settings,
    by_op_means,
    llamaindex_pipeline,
    markdown,
    speedups,
    summarize,
    verdict,
)


def _records(latencies: list[float], trial: int) -> list[dict]:
    return [{"i": i, "trial": trial, "ok": True, "latency": x, "compile_s": 0.0, "trace": []}
            for i, x in enumerate(latencies)]


def _entry(per_trial: list[list[float]]) -> dict:
    records = [r for k, xs in enumerate(per_trial) for r in _records(xs, k)]
    return {"rate": 0.3, "records": records, "summary": summarize(records, None),
            "trials": [{"summary": summarize(_records(xs, k), None)} for k, xs in enumerate(per_trial)]}


def _data(runs: dict) -> dict:
    iso = _records([1.0, 1.0], 0)
    return {"settings": {**Settings(trials=2).__dict__, "ablations": ()}, "rates": {"naive_rag": {"high": 0.3}},
            "engine_overrides": {}, "wall_seconds": 60.0, "skipped": {"LlamaIndex": "not installed"},
            "apps": {"naive_rag": {"isolated": {"records": iso, "bounds": [1.0, 1.0], "summary": summarize(iso, None)},
                                   "runs": {"high": runs}, "ablations": {}}}}


def test_speedup_mean_and_spread_over_trials():
    data = _data({"teola": _entry([[2.0, 2.0], [4.0, 4.0]]), "LlamaDist-PO": _entry([[3.0, 3.0], [4.0, 4.0]])})
    (row,) = speedups(data)
    assert row["trials"] == pytest.approx([1.5, 1.0])
    assert row["mean"] == pytest.approx(1.25) and (row["min"], row["max"]) == pytest.approx((1.0, 1.5))
    assert row["std"] > 0
    assert verdict(row) == "tie"
    assert verdict({**row, "trials": [1.2, 1.1], "min": 1.1, "max": 1.2}) == "teola faster"
    assert verdict({**row, "trials": [0.8, 0.9], "min": 0.8, "max": 0.9}) == "teola slower"
    assert verdict({**row, "trials": [1.02], "min": 1.02, "max": 1.02}) == "tie"


def test_report_lists_spread_and_skipped_system():
    data = _data({"teola": _entry([[2.0], [2.0]]), "LlamaDist-TO": _entry([[3.0], [2.5]])})
    md = markdown(data, "pytest")
    assert "| naive_rag | high | LlamaDist-TO | 1.38x (1.25-1.50) |" in md
    assert "**Skipped:** LlamaIndex: not installed" in md


def test_results_without_trials_still_render():
    entry = _entry([[2.0, 2.0]])
    del entry["trials"]
    (row,) = speedups(_data({"teola": entry, "LlamaDist-PO": _entry([[4.0, 4.0]])}))
    assert row["mean"] == pytest.approx(2.0) and row["std"] == 0.0


def test_llamaindex_missing_is_a_reason_not_a_crash(monkeypatch):
    monkeypatch.setitem(sys.modules, "bench.llamaindex_rag", None)  # import now raises ImportError
    rag, why = llamaindex_pipeline(object(), {})
    assert rag is None and "pip install -e '.[llamaindex]'" in why


def test_by_op_means_averages_exec_and_queue_over_queries():
    out = by_op_means([{"decoding": {"exec": 2.0, "queue": 1.0, "count": 1}},
                       {"decoding": {"exec": 4.0, "queue": 0.0, "count": 1},
                        "embedding": {"exec": 1.0, "queue": 0.0, "count": 2}}])
    assert out == {"decoding": {"exec": 3.0, "queue": 0.5, "count": 1.0},
                   "embedding": {"exec": 0.5, "queue": 0.0, "count": 1.0}}
