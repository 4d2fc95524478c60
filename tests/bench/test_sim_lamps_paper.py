"""bench.studies.sim.sim_lamps_paper (LAMPS' experiment at its set-up) in its smallest configuration, and the
pieces it adds to bench.studies.sim.sim_lamps: the vLLM baseline discards at every pause, the single-API
dataset pauses once per request, recompute is priced from a measured profile's token table, and fixed-length
runs count what finished. Tiny simulated runs; no timing."""

from __future__ import annotations

import argparse

import pytest

import bench.studies.sim.sim_lamps as sim
import bench.studies.sim.sim_lamps_handling as handling
import bench.studies.sim.sim_lamps_paper as paper
import bench.studies.sim.sim_lamps_requests as lamps_requests


def test_recompute_is_priced_from_the_token_table_of_a_measured_profile():
    from engines.sim.profile import load_profile

    derived = load_profile("a100-40gb-gptj-6b")["engines"]["vllm"]
    measured = load_profile("a100-40gb-gptj-6b-measured")["engines"]["vllm"]
    assert handling.fwd_seconds_per_token(derived) == derived["cost"]["prefill_token"]
    assert measured["cost"]["prefill_token"] == 0.0
    # a 2,048-token chunk of the table over its tokens: tens of microseconds per token, not 0
    assert 3e-5 < handling.fwd_seconds_per_token(measured) < 1e-4


def test_the_single_api_dataset_pauses_once_per_request_with_the_infercept_types():
    reqs = lamps_requests.requests("single", 300, 1.0, 2048, 0)
    assert {len(r["apis"]) for r in reqs} == {1}
    assert {r["type"] for r in reqs} == set(lamps_requests.MIXES["infercept"])


def test_the_drawn_durations_have_table_2s_means():
    dist = paper.distributions("infercept", n=3000)
    for kind in ("qa", "chatbot", "image"):
        want, got = dist[kind]["paper_duration"][0], dist[kind]["duration"][0]
        assert got == pytest.approx(want, rel=0.15), kind


def test_vllm_discards_at_every_pause_and_finishes_in_a_fixed_run():
    setup = paper.setup_for("a100-40gb-gptj-6b-measured", drain=60.0)
    out = paper.point("a100-40gb-gptj-6b-measured", "single", "vLLM", 0.5, 6.0, setup)
    assert out["measured"] > 0 and out["unfinished"] == 0
    assert (
        out["handlings"]["discard"] == out["measured"]
        and out["handlings"]["preserve"] == out["handlings"]["swap"] == 0
    )


def test_the_smallest_configuration_writes_a_page(monkeypatch):
    written = {}
    monkeypatch.setattr(
        paper,
        "write_results",
        lambda name, data, page, subject: written.update(name=name, data=data, page=page, subject=subject),
    )
    monkeypatch.setattr(
        paper,
        "distributions",
        lambda mix, **_: {  # the draws are tested above
            "_lengths": {"segment_tokens": [40.0, 30.0], "prompt_words": [250.0, 80.0]}
        },
    )
    p = argparse.ArgumentParser()
    paper.add_arguments(p)
    argv = [
        "--rates",
        "single=0.5",
        "--duration",
        "6",
        "--drain",
        "60",
        "--systems",
        "INFERCEPT,LAMPS",
        "--sweep-at",
        "single=0.5",
        "--no-sweep",
        "--out",
        "t",
    ]
    assert paper.run_cli(p.parse_args(argv), argv, p) == 0
    rows = written["data"]["mixes"]["single"]
    assert {r["system"] for r in rows} == {"INFERCEPT", "LAMPS"} and all(r["measured"] > 0 for r in rows)
    assert written["subject"] == "sim"
    assert "SIMULATED" in written["page"] and "Mechanism at single-API" in written["page"]


def test_the_paper_engine_has_no_prefix_cache_and_lamps_can_rank_inside_it(monkeypatch):
    from engines.sim import profile as sim_profile

    made = []
    real = sim_profile.simulated_engine

    def recording(*a, **kw):
        made.append(real(*a, **kw))
        return made[-1]

    monkeypatch.setattr(sim_profile, "simulated_engine", recording)
    setup = {**paper.setup_for("a100-40gb-gptj-6b-measured", drain=60.0), "engine_priority": True}
    out = paper.point("a100-40gb-gptj-6b-measured", "single", "LAMPS", 0.5, 6.0, setup)
    llm = made[-1]
    assert out["measured"] > 0 and llm.pool.prefix_caching is False and llm.scheduling == "priority"


@pytest.mark.parametrize("option, expected", [(None, "scheduled"), ("seen", "seen")])
def test_the_simulated_lamps_counts_starvation_as_teolas_policy_does(monkeypatch, option, expected):
    """Issue 62: the simulator's LAMPS is teola's `lamps` policy with its default reading of §4.4
    (the counter starts once LAMPS has scheduled the request); the set-up's `starvation_from`
    reaches it (the sweep's first-sight variant). A tiny simulated run; no timing."""
    from teola.scheduling.program.lamps import LAMPSPolicy

    made = []
    init = LAMPSPolicy.__init__

    def recording(self, *args, **kw):
        init(self, *args, **kw)
        made.append(self)

    monkeypatch.setattr(LAMPSPolicy, "__init__", recording)
    setup = paper.setup_for("a100-40gb-gptj-6b-measured", starvation_from=option)
    sim.run_point("a100-40gb-gptj-6b-measured", "single", "LAMPS", 0.5, 0.0, 4.0, 0.0, setup=setup)
    assert made and {p.starvation_from for p in made} == {expected}
