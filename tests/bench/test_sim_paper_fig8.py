"""bench/studies/sim/sim_paper_fig8.py (`python -m bench sim_paper --fig8`) at its smallest: the quick
configuration on 4 queries, simulated, and its page."""

from __future__ import annotations

from bench.studies.sim.sim_paper_fig8 import BASELINES, ablation_configs, paper_non_llm, slim, study
from bench.studies.sim.sim_paper_fig8_report import report


def test_ablations_keep_the_expansion_and_turn_one_mechanism_off_each():
    configs = ablation_configs()
    assert all(c["passes"]["prune_covered_searches"] is False for c, _ in configs.values())
    assert configs["no-topology-batching"][1] == "fifo" and configs["no-parallelization"][1] == "topology"
    assert configs["no-pipelining"][0]["passes"]["decode_pipelining"] is False
    none = configs["none-of-the-three"][0]["passes"]
    assert none["prune_dependencies"] is False and none["stage_decomposition"] is False


def test_paper_non_llm_engines_cost_more_per_token_than_the_profiles():
    data = paper_non_llm("a100-llama2-7b-measured")
    per_token = data["engines"]["sentence_transformers"]["op_cost"]["embedding"]["per_token"]
    assert 3.0e-5 < per_token < 3.3e-5  # 2 x 335M FLOPs at 30% of 71 TFLOPS


def test_quick_study_runs_and_its_page_compares_with_the_paper():
    data = study(4, quick=True)
    entry = data["variants"][0]["apps"]["advanced_rag"]
    assert {r["system"] for r in entry["rows"]} == {"teola", "teola-equal-work", *BASELINES}
    assert all(r["failed"] == 0 for r in entry["rows"])
    assert {"query_expansion", "indexing", "synthesis"} <= set(
        entry["alone"]["teola-equal-work"]["components"]
    )
    data |= {"wall_s": 1.0, "command": "python -m bench sim_paper --fig8 --quick"}
    page = report(data)
    assert "SIMULATED" in page and "2.09x" in page and "Where the time goes" in page
    assert report(slim(data)) == page  # the kept results still make the same page
    low = [r for r in slim(data)["variants"][0]["apps"]["advanced_rag"]["rows"] if r["fraction"] == 0.1]
    assert low and all("per_query" not in r for r in low)


def test_naive_rag_runs_with_only_its_own_engines_instanced():
    from bench.studies.sim.sim_paper_fig8 import SYSTEMS, run

    s = run("naive_rag", "a100-llama2-7b-measured", 1.0, 2, SYSTEMS["teola"], "small")
    assert s["failed"] == 0 and "reranker" not in s["busy"]
