"""bench.doc_qa with --remote-llm: the requests each system kept in flight on the `vllm serve`
process, per load point, and the sampler's summary they come from."""
from bench.doc_qa import inflight_table
from engines.vllm.serve_metrics import RunningSampler


def test_the_table_has_one_row_per_point_system_and_server():
    stats = {"http://a": {"max": 6, "mean_busy": 3.94, "samples": 40}}
    runs = {"advanced_rag/small": {"alone": {"teola": {"server_inflight": stats}, "LlamaIndex": {"server_inflight": {}}},
                                   "x2": {"rate": 0.4, "fraction": 2.0, "teola": {"server_inflight": stats}}}}
    rows = [line for line in inflight_table(runs) if line.startswith("| advanced_rag")]
    assert rows == ["| advanced_rag/small | alone | teola | 6 | 3.94 |", "| advanced_rag/small | x2 | teola | 6 | 3.94 |"]


def test_the_summary_counts_only_busy_samples_in_the_mean():
    sampler = RunningSampler(["http://a", "http://b"])
    sampler.samples = {"http://a": [0, 2, 4, 0], "http://b": []}
    assert sampler.summary() == {"http://a": {"max": 4, "mean_busy": 3.0, "samples": 4},
                                 "http://b": {"max": 0, "mean_busy": 0.0, "samples": 0}}
