"""The remote LLM engine fits its server's costs at start (engines/llm_text/cost_probe.py) through its
own requests: against `teola emulate` on a loopback port, timed on the wall clock by a measured A100
profile, the fit comes near that profile's costs (the request cost also holds the round trip)."""

from __future__ import annotations

import pytest

from engines.llm_text.costs import FITTED, EngineCosts, profile_costs

pytestmark = pytest.mark.services

PROFILE = "a100-llama3.1-8b-measured"


@pytest.fixture(scope="module")
def emulator_url():
    from bench.lib.results import serve_in_thread
    from engines.assets.paths import configure_engine_env
    from teola.emulate.server import create_emulator
    from teola.emulate.settings import EmulatorSettings

    configure_engine_env()
    url, server = serve_in_thread(create_emulator(EmulatorSettings(PROFILE)))
    yield url
    server.should_exit = True


async def test_the_probe_fits_the_servers_costs_at_start(emulator_url):
    from engines.openai.llm import OpenAILLMEngine

    engine = OpenAILLMEngine("llm", url=emulator_url)
    await engine.start()
    try:
        costs = EngineCosts.from_dict(engine.profile.costs)
    finally:
        await engine.stop()
    shipped = profile_costs(PROFILE)
    assert costs is not None and costs.source == FITTED and costs.block_size == engine.caps.block_size
    # a step at batch 1: base 2.7 ms + the token table's 9.7 ms for one token
    assert shipped.decode_step_s == pytest.approx(0.0124, rel=0.01)
    assert costs.decode_step_s == pytest.approx(shipped.decode_step_s, rel=0.3)
    assert shipped.request_s * 0.5 < costs.request_s < shipped.request_s + 0.05  # + the loopback round trip
    assert 0 < costs.probe_s < 2.0


async def test_costs_false_reports_none(emulator_url):
    from engines.openai.llm import OpenAILLMEngine

    engine = OpenAILLMEngine("llm", url=emulator_url, costs=False)
    await engine.start()
    try:
        assert engine.profile.costs == {}
    finally:
        await engine.stop()
