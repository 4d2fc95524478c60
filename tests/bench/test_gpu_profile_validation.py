"""The published-figure study of the measured GPU profiles (bench/studies/sim/gpu_profile_validation.py): its
per-part breakdown of a static batch against a hand computation and against the simulator's replica,
and each shipped figure's profile and metric."""

from __future__ import annotations

import pytest

from bench.studies.sim.gpu_figures import PUBLISHED, Published
from bench.studies.sim.gpu_profile_validation import breakdown, simulate
from engines.sim.cost import IterationCost
from teola.sim.replica import SimRequest, simulate_replica

COST = IterationCost(
    base=0.002, context_token=1e-6, prefill_attention=1e-3, token_table=((1, 0.01), (100, 0.02))
)


def test_breakdown_of_a_static_batch_matches_a_hand_computation_and_the_replica():
    # batch 2, prompts of 10, 3 output tokens: one prefill of 20 tokens (100 query-key pairs), then 2
    # decode iterations of 2 sequences at contexts 2 x 11 and 2 x 12
    parts = breakdown(COST, 0.0015, [(10, 3), (10, 3)])

    def table(n: int) -> float:
        return 0.01 + 0.01 * (n - 1) / 99

    assert parts["prefill_linear"] == pytest.approx(table(20))
    assert parts["prefill_attention"] == pytest.approx(1e-3 * 100 / 1000)
    assert parts["decode_linear"] == pytest.approx(2 * table(2))
    assert parts["decode_attention"] == pytest.approx(1e-6 * (22 + 24))
    assert parts["cpu_step"] == pytest.approx(3 * 0.0015)
    assert parts["lm_head"] == pytest.approx(3 * 0.0005)
    res = simulate_replica(
        [SimRequest(i, 10, 3) for i in range(2)], COST, max_num_seqs=2, budget=20, kv_tokens=26
    )
    assert res.end == pytest.approx(sum(parts.values()))


def test_breakdown_drops_each_request_from_the_decode_iterations_once_it_is_done():
    # (4, 1) is done at the prefill; (6, 3) decodes twice alone, at contexts 7 and 8
    parts = breakdown(COST, 0.002, [(4, 1), (6, 3)])
    assert parts["prefill_attention"] == pytest.approx(1e-3 * (8 + 18) / 1000)
    assert parts["decode_linear"] == pytest.approx(2 * 0.01)
    assert parts["decode_attention"] == pytest.approx(1e-6 * (7 + 8))
    res = simulate_replica(
        [SimRequest(0, 4, 1), SimRequest(1, 6, 3)], COST, max_num_seqs=2, budget=10, kv_tokens=14
    )
    assert res.end == pytest.approx(sum(parts.values()))


def test_throughput_is_output_tokens_per_second_per_gpu():
    pub = Published(
        "hand", "Llama-2-70B", "A100", 4, 8, 16, 4, "throughput_tok_s", 100.0, "a100-llama2-70b-tp4-measured"
    )
    row = simulate(pub)
    assert row["simulated"] == pytest.approx(8 * 4 / row["seconds"] / 4)
    assert row["error"] == pytest.approx(row["simulated"] / 100.0 - 1)


def test_every_figure_has_a_shipped_profile_of_its_model_and_gpu():
    for pub in PUBLISHED:
        row = simulate(pub)
        assert row["seconds"] > 0
        assert pub.profile.startswith(pub.gpu.split()[0].lower())
        assert ("70b" in pub.profile) == (pub.model == "Llama-2-70B")
