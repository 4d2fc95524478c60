"""bench.studies.rag.doc_qa_trials: pooling separate doc_qa runs (trials) by load fraction."""

from __future__ import annotations

from bench.studies.rag.doc_qa_trials import bound_ratio, critical_path_means, markdown, pool, tokens_per_step


def rec(latency: float, contains: float = 1.0, by_op: dict | None = None) -> dict:
    return {
        "ok": True,
        "latency": latency,
        "calls": 1,
        "prompt_tokens": 800,
        "decode_tokens": 40,
        "contains": contains,
        "f1": 0.1,
        "recall": 1.0,
        "by_op": by_op or {"decoding": {"exec": latency / 2, "queue": 0.5, "count": 1}},
    }


def trial(k: int, teola: list[float], llamaindex: list[float], rate: float) -> dict:
    alone = {"teola": {"records": [rec(5.0)]}, "LlamaIndex": {"records": [rec(10.0)]}}
    loaded = {
        "rate": rate,
        "fraction": 1.0,
        "teola": {"records": [rec(x) for x in teola]},
        "LlamaIndex": {"records": [rec(x) for x in llamaindex]},
    }
    return {
        "settings": {"seed": 0, "trial": k, "n_alone": 1, "n_load": len(teola), "sizes": {"large": 28}},
        "seconds": 60.0,
        "machine": {"commit": "abc", "cpu": "test"},
        "runs": {"advanced_rag/large": {"alone": alone, "x1": loaded}},
    }


def test_pool_keeps_each_trials_mean_and_pools_the_queries():
    trials = [trial(0, [10.0, 14.0], [24.0, 24.0], 0.10), trial(1, [20.0, 20.0], [20.0, 20.0], 0.08)]
    e = pool(trials)["apps"]["advanced_rag/large"]["runs"]["x1"]["teola"]
    assert [t["summary"]["mean"] for t in e["trials"]] == [12.0, 20.0]
    assert e["summary"]["n"] == 4 and e["summary"]["mean"] == 16.0
    assert e["rates"] == [0.10, 0.08]


def test_markdown_reports_per_trial_ratios_and_a_tie_when_trials_disagree():
    # trial 0: LlamaIndex 24 / teola 12 = 2.0x; trial 1: 20 / 20 = 1.0x -> mean 1.5x, not every trial faster
    md = markdown(
        [trial(0, [10.0, 14.0], [24.0, 24.0], 0.10), trial(1, [20.0, 20.0], [20.0, 20.0], 0.08)],
        ["t0", "t1"],
        "cmd",
    )
    row = next(line for line in md.splitlines() if line.startswith("| advanced_rag/large | 1x"))
    assert "1.50x (1.00-2.00)" in row and "| tie |" in row and "2.00, 1.00" in row
    assert "0.080-0.100 q/s" in row
    assert "| decoding |" in md  # where the time goes, from the records' per-op times


def test_markdown_says_faster_only_when_every_trial_is():
    md = markdown([trial(0, [10.0], [15.0], 0.1), trial(1, [10.0], [12.0], 0.1)], ["t0", "t1"], "cmd")
    row = next(line for line in md.splitlines() if line.startswith("| advanced_rag/large | 1x"))
    assert "| teola faster |" in row


def test_pool_drops_points_a_trial_did_not_run():
    a, b = trial(0, [10.0], [15.0], 0.1), trial(1, [10.0], [12.0], 0.1)
    del b["runs"]["advanced_rag/large"]["x1"]
    assert list(pool([a, b])["apps"]["advanced_rag/large"]["runs"]) == ["alone"]


def test_bound_ratio_pairs_each_loaded_query_with_its_own_alone_bound_in_the_same_trial():
    loaded = [
        [{"ok": True, "latency": 8.0}, {"ok": True, "latency": 9.0}, {"ok": True, "latency": 30.0}],
        [{"ok": True, "latency": 6.0}, {"ok": False, "latency": 1.0}],
    ]
    alone = [[{"bound": 4.0}, {"bound": 3.0}], [{"bound": 2.0}, {"bound": 5.0}]]
    # trial 0: 8/4, 9/3 (query 2 never ran alone); trial 1: 6/2 (query 1 failed)
    assert bound_ratio(loaded, alone) == (2.0 + 3.0 + 3.0) / 3
    assert bound_ratio(loaded, [[], []]) is None


def test_tokens_per_step_and_critical_path_skip_trials_that_did_not_record_them():
    assert (
        tokens_per_step(
            [
                {"vllm_steps": {"decode_steps": 10, "generated_tokens": 40}},
                {},
                {"vllm_steps": {"decode_steps": 30, "generated_tokens": 80}},
            ]
        )
        == 3.0
    )
    assert tokens_per_step([{}, {"vllm_steps": {}}]) is None
    shares = critical_path_means(
        [
            {"critical_path": {"compile": 0.1, "execution": 0.5}},
            {},
            {"critical_path": {"compile": 0.3, "execution": 0.7}},
        ]
    )
    assert shares == {"compile": 0.2, "execution": 0.6}


def test_markdown_reports_every_baseline_with_its_own_ratio_and_decode_batching():
    t0, t1 = trial(0, [10.0], [15.0], 0.1), trial(1, [10.0], [12.0], 0.1)
    for t, ld in ((t0, 30.0), (t1, 20.0)):
        t["runs"]["advanced_rag/large"]["x1"]["LlamaDist-PO"] = {
            "records": [rec(ld)],
            "vllm_steps": {"decode_steps": 10, "generated_tokens": 25},
        }
    md = markdown([t0, t1], ["t0", "t1"], "cmd")
    rows = [line for line in md.splitlines() if line.startswith("| advanced_rag/large | 1x")]
    assert (
        "| LlamaIndex | 1.35x (1.20-1.50) |" in rows[0] and "| LlamaDist-PO | 2.50x (2.00-3.00) |" in rows[1]
    )
    assert "tokens / decode step, LlamaDist-PO" in md and "| 2.50 |" in md


def test_markdown_names_the_serialised_engines_only_when_every_run_recorded_them():
    t0, t1 = trial(0, [10.0], [15.0], 0.1), trial(1, [10.0], [12.0], 0.1)
    t0["exclusive_engines"], t1["exclusive_engines"] = ["embedding", "rerank"], ["embedding"]
    assert "one batch at a time (embedding)" in markdown([t0, t1], ["t0", "t1"], "cmd")
    del t1["exclusive_engines"]  # a run from before the bound serialised engines
    md = markdown([t0, t1], ["t0", "t1"], "cmd")
    assert "one batch at a time" not in md and "(longest path)" in md
