"""The end-to-end RAG study (bench/studies/rag/rag*.py) without engines: speedups over trials, verdicts,
the report, and the LlamaIndex system being skipped (not crashing) when llama-index-core cannot be
imported."""

from __future__ import annotations

import sys

import pytest

from bench.studies.rag.rag_analysis import (
    by_op_means,
    critical_path_bound,
    critical_path_shares,
    exclusive_engines,
    speedups,
    summarize,
    verdict,
)
from bench.studies.rag.rag_page import markdown
from bench.studies.rag.rag_runs import llamaindex_pipeline
from bench.studies.rag.rag_setup import Settings


def _records(latencies: list[float], trial: int) -> list[dict]:
    return [
        {"i": i, "trial": trial, "ok": True, "latency": x, "compile_s": 0.0, "trace": []}
        for i, x in enumerate(latencies)
    ]


def _entry(per_trial: list[list[float]]) -> dict:
    records = [r for k, xs in enumerate(per_trial) for r in _records(xs, k)]
    return {
        "rate": 0.3,
        "records": records,
        "summary": summarize(records, None),
        "trials": [{"summary": summarize(_records(xs, k), None)} for k, xs in enumerate(per_trial)],
    }


def _data(runs: dict) -> dict:
    iso = _records([1.0, 1.0], 0)
    return {
        "settings": {**Settings(trials=2).__dict__, "ablations": ()},
        "rates": {"naive_rag": {"high": 0.3}},
        "engine_overrides": {},
        "wall_seconds": 60.0,
        "skipped": {"LlamaIndex": "not installed"},
        "apps": {
            "naive_rag": {
                "isolated": {"records": iso, "bounds": [1.0, 1.0], "summary": summarize(iso, None)},
                "runs": {"high": runs},
                "ablations": {},
            }
        },
    }


def test_speedup_mean_and_spread_over_trials():
    data = _data(
        {"teola": _entry([[2.0, 2.0], [4.0, 4.0]]), "LlamaDist-PO": _entry([[3.0, 3.0], [4.0, 4.0]])}
    )
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
    monkeypatch.setitem(sys.modules, "bench.baselines.llamaindex_rag", None)  # import now raises ImportError
    rag, why = llamaindex_pipeline(object(), {})
    assert rag is None and "bash scripts/setup.sh" in why


def test_by_op_means_averages_exec_and_queue_over_queries():
    out = by_op_means(
        [
            {"decoding": {"exec": 2.0, "queue": 1.0, "count": 1}},
            {
                "decoding": {"exec": 4.0, "queue": 0.0, "count": 1},
                "embedding": {"exec": 1.0, "queue": 0.0, "count": 2},
            },
        ]
    )
    assert out == {
        "decoding": {"exec": 3.0, "queue": 0.5, "count": 1.0},
        "embedding": {"exec": 0.5, "queue": 0.0, "count": 1.0},
    }


def _prim(name: str, engine: str, start: float, end: float, **kw) -> dict:
    return {"primitive": name, "engine": engine, "started": start, "finished": end, "status": "ok", **kw}


# e -> {b1, b2, b3} (three embedding batches of 2 s, run in turn by one embedder) -> s (1 s search)
# -> d (3 s decode); the expansion x (4 s) runs beside the batches and also feeds s.
FAN = {"e": [], "b1": ["e"], "b2": ["e"], "b3": ["e"], "x": ["e"], "s": ["b1", "b2", "b3", "x"], "d": ["s"]}
FAN_TRACE = [
    _prim("e", "pre", 0, 1),
    _prim("b1", "emb", 1, 3),
    _prim("b2", "emb", 3, 5),
    _prim("b3", "emb", 5, 7),
    _prim("x", "llm", 1, 5),
    _prim("s", "db", 7, 8),
    _prim("d", "llm", 8, 11),
]


def test_bound_without_exclusive_engines_is_the_longest_path():
    assert critical_path_bound(FAN, FAN_TRACE) == pytest.approx(1 + 4 + 1 + 3)  # e, x, s, d


def test_bound_serialises_the_batches_of_an_exclusive_engine():
    # head 1 (e) + the embedder busy 6 s + shortest tail 4 (s, d) = 11: the run was already optimal
    assert critical_path_bound(FAN, FAN_TRACE, exclusive=("emb",)) == pytest.approx(11.0)
    # an engine that runs batches side by side is not serialised; an engine absent from the trace is ignored
    assert critical_path_bound(FAN, FAN_TRACE, exclusive=("llm", "nope")) == pytest.approx(9.0)


def test_bound_counts_one_batch_shared_by_primitives_once():
    trace = [dict(t) for t in FAN_TRACE]
    for t in trace:  # b1 and b2 ran as one 2 s batch
        if t["primitive"] == "b2":
            t.update(started=1, finished=3)
        if t["primitive"] == "b3":
            t.update(started=3, finished=5)
    assert critical_path_bound(FAN, trace, exclusive=("emb",)) == pytest.approx(max(1 + 4 + 1 + 3, 1 + 4 + 4))


def test_bound_skips_failed_primitives():
    trace = [dict(t) for t in FAN_TRACE]
    trace[3]["status"] = "error"  # b3
    assert critical_path_bound(FAN, trace, exclusive=("emb",)) == pytest.approx(
        9.0
    )  # 1 + 4 + 4 = longest path


def test_fig11_shares_walk_the_critical_path_the_ui_shows():
    # the hand-made trace of tests/unit/trace: a fused prefill+decode whose decode also reads a key of
    # an earlier primitive; by hand the path is expand (0-0.3), rerank (gap 0.05, queued 0.05, runs
    # 0.6), the fused pair (queued 0.2, runs 0.8)
    trace = [
        {**_prim("expand.decode", "llm", 0.0, 0.3), "queued": 0.0},
        {**_prim("rerank", "rr", 0.4, 1.0), "queued": 0.35},
        {**_prim("synth.prefill", "llm", 1.2, 2.0, fused_into="synth.decode"), "queued": 1.0},
        {**_prim("synth.decode", "llm", 1.2, 2.0, fused_with="synth.prefill"), "queued": 1.0},
    ]
    parents = {
        "expand.decode": [],
        "rerank": ["expand.decode"],
        "synth.prefill": ["rerank", "expand.decode"],
        "synth.decode": ["synth.prefill", "expand.decode"],
    }
    rec = {"ok": True, "latency": 2.5, "compile_s": 0.2, "parents": parents, "trace": trace}
    assert critical_path_shares(rec) == pytest.approx(
        {
            "compile": 0.2 / 2.5,
            "queueing": 0.25 / 2.5,
            "execution": 1.7 / 2.5,
            "scheduling_comm": (2.5 - 0.2 - 1.7 - 0.25) / 2.5,
            "gap_on_path_s": 0.05,
        }
    )
    assert critical_path_shares({**rec, "ok": False}) is None


def test_exclusive_engines_are_those_with_one_batch_of_capacity():
    class Runtime:
        def health(self):
            return {"embedding": {"capacity": 1}, "llm": {"capacity": 8}, "db": {"capacity": 2}}

    assert exclusive_engines(Runtime()) == ("embedding",)


def test_paper_baselines_turn_every_default_pass_off_speculative_search_included():
    from bench.studies.rag.rag_setup import PAPER_BASELINES, SYSTEMS
    from teola.passes.registry import enabled_by_default, pass_names

    defaults = [n for n in pass_names() if enabled_by_default(n)]
    assert "speculative_search" in defaults
    for name in PAPER_BASELINES:
        passes = SYSTEMS[name][0]["passes"]
        assert all(passes.get(n) is False for n in defaults), name
    assert SYSTEMS["teola"][0] == {}
