"""`teola profile`'s contention phase (teola/sim/contention.py) on the real engines: it times the
LLM and the embedder alone and under each other's load and writes a device entry the simulator
accepts. The factors are measurements, so only their form is asserted."""

import pytest

from engines.sim.device import DeviceShare
from teola.sim.contention import profile_contention
from teola.sim.profile_batches import prose as _prose

pytestmark = pytest.mark.engines


async def test_the_probe_times_both_engines_under_each_others_load(llm_engine, embedding_engine):
    said: list[str] = []
    device = await profile_contention(
        {"vllm": llm_engine, "sentence_transformers": embedding_engine}, _prose, said.append, repeats=1
    )
    assert device["exclusive"] == (["sentence_transformers"] if embedding_engine.exclusive else [])
    for key, slowed in (
        ("vllm|sentence_transformers", "vllm"),
        ("sentence_transformers|vllm", "sentence_transformers"),
    ):
        [(alone, loaded)] = next(v for k, v in device["fit"][key].items() if k.endswith("_s"))
        assert alone > 0 and loaded > 0
        other = key.split("|")[1]
        assert device["slowdown"][slowed][other] == pytest.approx(max(1.0, loaded / alone), abs=1e-3)
    assert said and "while" in said[0]
    share = DeviceShare.from_profile("sentence_transformers", device)
    assert share is not None and share.kind == "sentence_transformers"
