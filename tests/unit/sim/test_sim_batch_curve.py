"""The decode batch curve of the simulated LLM's iteration cost (engines.sim.cost): where it applies,
how teola.sim.fit takes it from streamed step measurements, and that a profile of an engine whose
decode step is not linear in the batch gets every step within a few percent with it."""

from __future__ import annotations

import math

import pytest

from engines.sim.cost import IterationCost
from teola.sim.fit import _score_steps, batch_curve
from teola.sim.replica import SimRequest, simulate_replica
from tests.unit.plan.test_plan_cost import _sim_llm_seconds
from tests.unit.sim.test_sim_fit import _profiled


def test_the_curve_scales_decode_only_iterations_between_and_past_its_knots():
    cost = IterationCost(
        base=0.01, decode_seq=0.001, prefill_token=0.002, decode_batch_factor=[[2, 1.2], [6, 0.8]]
    )
    assert cost.factor(1) == 1.2 and cost.factor(2) == 1.2
    assert cost.factor(4) == pytest.approx(1.0)  # halfway from 1.2 to 0.8
    assert cost.factor(6) == 0.8 and cost.factor(64) == 0.8
    assert cost.seconds(0, 4, 0) == pytest.approx((0.01 + 0.004) * 1.0)
    assert cost.seconds(0, 2, 0) == pytest.approx((0.01 + 0.002) * 1.2)
    # an iteration with a prefill chunk in it keeps the linear form
    assert cost.seconds(10, 2, 0) == pytest.approx(0.01 + 0.002 + 0.02)
    assert IterationCost(base=0.01).factor(3) == 1.0


@pytest.mark.parametrize(
    "knots,word", [([[4, 1.0], [2, 1.0]], "ascending"), ([[0, 1.0]], "ascending"), ([[1, 0.0]], "positive")]
)
def test_a_malformed_curve_is_refused_with_what_is_wrong(knots, word):
    with pytest.raises(ValueError, match=word):
        IterationCost(decode_batch_factor=knots)


def test_each_batch_gets_the_gap_weighted_geometric_mean_of_measured_over_linear():
    steps = [
        {"batch": 2, "measured_s": 2.0, "linear_s": 1.0, "gaps": 3},
        {"batch": 2, "measured_s": 0.5, "linear_s": 1.0, "gaps": 1},
        {"batch": 8, "measured_s": 0.9, "linear_s": 1.0, "gaps": 5},
    ]
    # batch 2: exp((3 ln 2 + 1 ln 0.5) / 4) = 2 ** 0.5
    assert batch_curve(steps) == [[2, round(math.sqrt(2), 4)], [8, 0.9]]
    assert batch_curve([]) == []


def test_step_errors_are_scored_in_sample_and_with_the_factor_held_out():
    steps = [
        {"batch": 4, "prompt_tokens": 80, "measured_s": 0.9, "linear_s": 1.0, "gaps": 1},
        {"batch": 4, "prompt_tokens": 600, "measured_s": 0.8, "linear_s": 1.0, "gaps": 1},
        {"batch": 1, "prompt_tokens": 80, "measured_s": 1.1, "linear_s": 1.0, "gaps": 1},
    ]
    _score_steps(steps, dict(batch_curve(steps)))
    f4 = math.sqrt(0.9 * 0.8)
    assert steps[0]["error"] == pytest.approx((f4 - 0.9) / 0.9, abs=1e-4)
    assert steps[0]["held_out_error"] == pytest.approx(
        (0.8 - 0.9) / 0.9, abs=1e-4
    )  # the 600-token row's factor
    assert steps[1]["held_out_error"] == pytest.approx((0.9 - 0.8) / 0.8, abs=1e-4)
    assert (
        steps[2]["error"] == pytest.approx(0.0) and steps[2]["held_out_error"] is None
    )  # no other prompt size


def test_the_fast_replica_simulation_follows_the_curve_like_the_simulated_engine():
    cost = IterationCost(
        base=0.01,
        prefill_token=1e-4,
        decode_seq=2e-3,
        context_token=1e-6,
        decode_batch_factor=[[1, 1.3], [4, 0.7], [8, 1.1]],
    )
    prompts = [40 + 37 * (i % 7) for i in range(24)]
    outs = [5 + 13 * (i % 5) for i in range(24)]
    slow = _sim_llm_seconds(prompts, outs, cost, 8, 2048)
    fast = simulate_replica(
        [SimRequest(i, p, o) for i, (p, o) in enumerate(zip(prompts, outs))], cost, 8, 2048, 10**9
    )
    linear = simulate_replica(
        [SimRequest(i, p, o) for i, (p, o) in enumerate(zip(prompts, outs))],
        IterationCost(base=0.01, prefill_token=1e-4, decode_seq=2e-3, context_token=1e-6),
        8,
        2048,
        10**9,
    )
    assert fast.end == pytest.approx(slow, rel=0.03)
    assert abs(fast.end - linear.end) > 0.03 * linear.end  # the curve did change the answer


def test_profiling_an_engine_with_a_dip_at_batch_4_fits_the_dip():
    """A simulated engine whose decode step at 4 sequences is 20% below its linear form: the
    profile's linear part misses those steps, the fitted curve takes the dip, and the model is
    within 3% of every measured step and 4% of every decoding batch's total."""
    true = {
        "base": 0.03,
        "prefill_token": 2e-4,
        "decode_seq": 2e-3,
        "context_token": 2e-5,
        "decode_batch_factor": [[1, 1.0], [2, 1.0], [4, 0.8], [8, 1.0]],
    }
    entry = _profiled(true, max_num_seqs=8, max_num_batched_tokens=1024)
    curve = dict(entry["cost"]["decode_batch_factor"])
    assert sorted(curve) == [1, 2, 4, 8]
    assert curve[4] < 0.9 * min(curve[1], curve[2], curve[8])
    steps = entry["fit"]["steps"]
    assert max(abs(s["error"]) for s in steps) < 0.03
    assert (
        max(abs(s["linear_s"] - s["measured_s"]) / s["measured_s"] for s in steps if s["batch"] == 4) > 0.08
    )
    decodes = [s for s in entry["fit"]["samples"] if s["out_tokens"]]
    # each batch total is simulated again under the whole model, the linear part's answer kept beside it
    assert max(abs(s["error"]) for s in decodes) < 0.04
    assert max(abs(s["linear_s"] - s["measured_s"]) / s["measured_s"] for s in decodes) > 0.10
    assert (
        max(abs(s["error"]) for s in entry["fit"]["samples"]) < 0.05
    )  # prefill-only totals: the linear form
