"""An LLM engine's costs (engines.llm_text.costs / cost_probe): fitted at start by a short probe, or
read from a named profile, reported in `EngineProfile.costs`."""

import pytest

from engines.llm_text.cost_probe import engine_costs, fit, probe_costs
from engines.llm_text.costs import FITTED, EngineCosts, check_costs_option, profile_costs
from engines.sim.llm import IterationCost, SimLLM
from teola.sim.virtual_loop import run_virtual


def probed(cost: IterationCost, option: bool | str = True) -> dict:
    async def main() -> dict:
        engine = SimLLM("llm", cost, block_size=16)
        await engine.start()
        try:
            return await engine_costs(engine, option, 16)
        finally:
            await engine.stop()

    return run_virtual(main())


def test_the_probe_recovers_the_costs_of_an_engine_whose_costs_are_known():
    # the simulated engine's step: base + prefill_token per prompt token + decode_seq per sequence
    costs = EngineCosts.from_dict(probed(IterationCost(base=0.02, prefill_token=0.001, decode_seq=0.01)))
    assert costs is not None and costs.source == FITTED and costs.block_size == 16
    assert costs.request_s == pytest.approx(0.02, rel=0.05)
    assert costs.prefill_token_s == pytest.approx(0.001, rel=0.05)
    assert costs.decode_step_s == pytest.approx(0.03, rel=0.05)  # one step at batch 1: base + decode_seq
    assert costs.error < 0.02 and 0 < costs.probe_s < 1.0  # virtual seconds of engine time


def test_the_fit_keeps_its_residual():
    noisy = [(20, 1, 0.05), (60, 1, 0.09), (120, 1, 0.14), (20, 6, 0.20)]
    costs = fit(noisy, 32, 0.5)
    assert costs.error > 0 and costs.prefill_token_s > 0 and costs.decode_step_s > 0


def test_a_named_profile_is_reported_instead_and_false_reports_none():
    assert probed(IterationCost(base=0.02), "cpu-smollm2-135m") == profile_costs("cpu-smollm2-135m").as_dict()
    assert probed(IterationCost(base=0.02), False) == {}
    shipped = profile_costs("cpu-smollm2-135m")
    assert shipped.block_size == 32 and shipped.decode_step_s > shipped.request_s > 0
    with pytest.raises(ValueError, match="option costs: profile 'nope' gives no vllm costs"):
        check_costs_option("llm", "nope")
    with pytest.raises(ValueError, match="option costs must be true, false or a profile name"):
        check_costs_option("llm", 3)


def test_probe_costs_on_a_started_engine_returns_fitted_costs():
    async def main() -> EngineCosts:
        engine = SimLLM("llm", IterationCost(base=0.01, prefill_token=0.002, decode_seq=0.004), block_size=32)
        await engine.start()
        try:
            return await probe_costs(engine, 32)
        finally:
            await engine.stop()

    costs = run_virtual(main())
    assert costs.prefill_token_s == pytest.approx(0.002, rel=0.05) and costs.block_size == 32
