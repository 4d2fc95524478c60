"""bench.studies.rag.doc_qa with --remote-llm: the requests each system kept in flight on the `vllm serve`
process, per load point and over time at the highest load, and the sampler's summary they come from."""

from bench.studies.rag.doc_qa_page import inflight_series, inflight_table
from engines.vllm.serve_metrics import RunningSampler


def test_the_table_has_one_row_per_point_system_and_server():
    stats = {"http://a": {"max": 6, "mean_busy": 3.94, "samples": 40}}
    runs = {
        "advanced_rag/small": {
            "alone": {"teola": {"server_inflight": stats}, "LlamaIndex": {"server_inflight": {}}},
            "x2": {"rate": 0.4, "fraction": 2.0, "teola": {"server_inflight": stats}},
        }
    }
    rows = [line for line in inflight_table(runs) if line.startswith("| advanced_rag")]
    assert rows == [
        "| advanced_rag/small | alone | teola | 6 | 3.94 |",
        "| advanced_rag/small | x2 | teola | 6 | 3.94 |",
    ]


def test_the_summary_counts_only_busy_samples_in_the_mean():
    sampler = RunningSampler(["http://a", "http://b"])
    sampler.samples = {"http://a": [0, 2, 4, 0], "http://b": []}
    assert sampler.summary() == {
        "http://a": {"max": 4, "mean_busy": 3.0, "samples": 4},
        "http://b": {"max": 0, "mean_busy": 0.0, "samples": 0},
    }


def test_the_series_takes_the_most_running_per_window():
    sampler = RunningSampler(["http://a"])
    sampler.samples = {"http://a": [0, 1, 3, 2, 4, 4, 0, 0, 1]}
    assert sampler.series("http://a", 4) == [3, 4, 1]
    assert sampler.summary(per=4)["http://a"]["series"] == [3, 4, 1]


def test_the_series_are_shown_at_each_flows_highest_load():
    series = lambda xs: {"http://a": {"max": max(xs), "mean_busy": 1.0, "samples": 4, "series": xs}}
    runs = {
        "advanced_rag/small": {
            "alone": {"teola": {"server_inflight": series([1])}},
            "x1": {"rate": 0.2, "fraction": 1.0, "teola": {"server_inflight": series([2, 2])}},
            "x4": {
                "rate": 0.8,
                "fraction": 4.0,
                "teola": {"server_inflight": series([3, 5, 1])},
                "LlamaIndex": {"server_inflight": series([1, 1])},
            },
        }
    }
    lines = inflight_series(runs)
    assert "at 4x" in lines[1]
    assert lines[4:7] == ["teola       3 5 1", "LlamaIndex  1 1", "```"]
