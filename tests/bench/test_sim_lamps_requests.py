"""bench.studies.sim.sim_lamps' workload: the API durations it draws have LAMPS Table 2's mean and std per API
type, so the mean FCFS + INFERCEPT's handling is given (the table's) is the mean LAMPS learns
online from the durations it observes (issue 18: with Normal(1.72, 3.33) clipped at 0 the ToolBench
durations averaged 2.36 s, LAMPS swapped at every pause while the baseline, deciding with 1.72 s,
preserved under load)."""

from __future__ import annotations

import math
import statistics

import pytest

from bench.studies.sim.sim_lamps_requests import MIXES, requests
from teola.scheduling.program.lamps import LAMPSPolicy


def durations(mix: str, n: int = 20000) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in requests(mix, n, 5.0, 4096, 0):
        out.setdefault(r["type"], []).extend(r["apis"])
    return out


def test_lamps_workload_toolbench_durations_have_the_table_mean_and_std():
    (mean, std), _ = MIXES["toolbench"]["toolbench"]
    got = durations("toolbench")["toolbench"]
    assert min(got) > 0
    assert statistics.fmean(got) == pytest.approx(mean, rel=0.05)
    assert statistics.pstdev(got) == pytest.approx(
        std, rel=0.25
    )  # a heavy tail: the sample std converges slowly


def test_lamps_workload_infercept_mix_durations_have_each_types_mean():
    got = durations("infercept", 6000)
    for kind, ((mean, _), _) in MIXES["infercept"].items():
        assert statistics.fmean(got[kind]) == pytest.approx(mean, rel=0.05), kind


def test_lamps_learns_the_api_mean_the_infercept_baseline_is_given():
    (mean, _), _ = MIXES["toolbench"]["toolbench"]
    policy = LAMPSPolicy(api_defaults={"toolbench": mean})
    for seconds in durations("toolbench")["toolbench"]:
        policy.observe_api("toolbench", seconds)
    assert policy.api_mean["toolbench"][0] == pytest.approx(mean, rel=0.05)


def test_lamps_workload_lognormal_params_match_the_moments():
    from bench.studies.sim.sim_lamps_requests import lognormal_params

    mu, sigma = lognormal_params(1.72, 3.33)
    assert math.exp(mu + sigma**2 / 2) == pytest.approx(1.72)
    assert math.sqrt((math.exp(sigma**2) - 1) * math.exp(2 * mu + sigma**2)) == pytest.approx(3.33)
    assert lognormal_params(2.0, 0.0) == (pytest.approx(math.log(2.0)), 0.0)


def test_predicted_lengths_carry_the_measured_predictors_error(tmp_path):
    import json

    from bench.studies.sim.sim_lamps_requests import predicted, prediction_ratios

    assert predicted(40, "r1-0", None) == 40  # no predictor: the true length (an oracle)
    path = tmp_path / "length_predictor.json"
    path.write_text(json.dumps({"holdout": [[100, 50.0], [20, 60.0], [0, 5.0]]}))
    ratios = prediction_ratios(str(path))
    assert ratios == [0.5, 3.0]  # a row with no output gives no ratio
    got = {predicted(40, f"r{i}-0", ratios) for i in range(50)}
    assert got == {20, 120}
    # the same segment is told the same length in every system's run
    assert predicted(40, "r7-2", ratios) == predicted(40, "r7-2", ratios)
    assert predicted(1, "r3-0", [0.01]) == 1
    path.write_text(json.dumps({"learned": {}}))
    with pytest.raises(SystemExit, match="no held-out predictions"):
        prediction_ratios(str(path))
    with pytest.raises(SystemExit, match="no such file"):
        prediction_ratios(str(tmp_path / "missing.json"))
