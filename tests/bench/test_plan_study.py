"""bench/studies/plan/plan_study.py (`python -m bench plan_study`) at its smallest: one tiny job of each
kind planned by every method, its GPU-time split and its page."""

from __future__ import annotations

import pytest

from bench.studies.plan import plan_study as ps


@pytest.fixture(scope="module")
def rows():
    return [
        ps.run(ps._with_lengths(spec, ps.LENGTHS))
        for spec in (ps.ensembling(12, 64), ps.routing(20), ps.chain(3, 1), ps.mix(3, 12))
    ]


def test_every_method_plans_every_tiny_job_end_to_end(rows):
    for r in rows:
        for k in ps.METHODS:
            m = r[k]
            assert m["end_to_end_s"] == pytest.approx(m["completion_s"] + m["search_s"], abs=0.2)
        assert r["speedup_vs_better"] == min(r["speedup_vs_max"], r["speedup_vs_min"])


def test_gpu_time_adds_up_to_gpus_times_inference(rows):
    for r in rows:
        for k in ("greedy", "max", "min"):
            m = r[k]
            total = m["idle_gpu_s"] + m["loading_gpu_s"] + m["serving_gpu_s"]
            assert total == pytest.approx(8 * m["completion_s"], rel=0.02, abs=1.0)
            assert m["loads"] >= 1 and m["mean_tp"] >= 1 and m["mean_dp"] >= 1


def test_page_names_the_paper_and_the_mechanisms(rows):
    data = {
        "rows": rows,
        "gpus": 8,
        "lengths": ps.LENGTHS,
        "lengths_source": "test",
        "command": "python -m bench plan_study --quick",
        "summary": {
            "mean_vs_better": 1.0,
            "mean_vs_max": 1.0,
            "mean_vs_min": 1.0,
            "mean_vs_best_of_3": 1.0,
            "greedy_search_s_max": 0.1,
            "best_of_3_search_s_max": 0.1,
        },
    }
    page = ps.markdown(data)
    assert "SIMULATED" in page and "1.0-2.4x" in page and "idle GPU-s" in page
