"""The in-process vLLM adapter reports its costs once started (EngineProfile.costs), fitted by the
start-up probe (engines/llm_text/cost_probe.py); values depend on the machine's load, so only their
shape and consistency are checked."""

import pytest

from engines.llm_text.costs import FITTED, EngineCosts

pytestmark = pytest.mark.engines


async def test_the_started_engine_reports_fitted_costs(llm_engine):
    costs = EngineCosts.from_dict(llm_engine.profile.costs)
    assert costs is not None and costs.source == FITTED
    assert costs.block_size == llm_engine.block_size
    assert costs.decode_step_s > 0 and costs.request_s + costs.prefill_token_s > 0
    assert costs.probe_s > 0 and 0 <= costs.error < 1


def test_the_costs_option_is_checked_when_the_engine_is_built():
    from engines.vllm.engine import VLLMEngine

    assert VLLMEngine("x", costs=False).costs_option is False
    assert VLLMEngine("x", costs="cpu-smollm2-135m").costs_option == "cpu-smollm2-135m"
    with pytest.raises(ValueError, match="option costs"):
        VLLMEngine("x", costs="no-such-profile")
