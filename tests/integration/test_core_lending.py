"""Core lending on the real engines (engines/machine/core_share.py): a vLLM instance that shares the CPU
with the sentence-transformers models computes on every core while they idle, is moved back to its
own core before they compute, and gets every core again when they are done."""

from __future__ import annotations

import asyncio
import os

import pytest
import pytest_asyncio

from engines.machine.core_share import process_share
from engines.sentence_transformers.embedding import EmbeddingEngine
from engines.vllm.engine import VLLMEngine
from teola.runtime.requests import llm_request

pytestmark = [
    pytest.mark.engines,
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2+ cores"),
]

CORES = sorted(os.sched_getaffinity(0))
HOME = str(CORES[-1])


def model_cores(engine: VLLMEngine) -> set[int]:
    """The cores the threads of the instance's engine-core process (where the model computes) may use."""
    cores: set[int] = set()
    for pid in engine.process_ids():
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                cores |= os.sched_getaffinity(int(tid))
            except OSError:
                pass
    return cores


async def given_back(engine: VLLMEngine) -> set[int]:
    """The instance's cores once a pending move settles: cores are moved by a task between two of
    vLLM's steps, so right after the models' work ends the move may still be under way."""
    for _ in range(50):
        if model_cores(engine) == set(CORES):
            break
        await asyncio.sleep(0.05)
    return model_cores(engine)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def lending():
    llm = VLLMEngine(
        "lending-llm", max_model_len=1024, max_num_seqs=4, cpu_threads_bind=HOME, share_cores=True
    )
    embedder = EmbeddingEngine(
        "lending-embedding", model="all-minilm-l6-v2", torch_threads=1, exclusive=True, share_cores=True
    )
    await llm.start()
    await embedder.start()
    try:
        yield llm, embedder
    finally:
        await embedder.stop()
        await llm.stop()


@pytest.mark.asyncio(loop_scope="session")
async def test_vllm_computes_on_every_core_while_the_models_idle_and_on_its_own_while_they_compute(lending):
    llm, embedder = lending
    share = process_share()
    assert await given_back(llm) == set(CORES)  # the embedder's warm-up at start may still be giving back
    out = await llm.execute("decoding", [llm_request([["user", "Name a color."]], True, {"max_tokens": 8})])
    assert out[0]["text"]
    chunks = [{"text": f"passage {i}: " + "rivers carry water to the sea " * 30} for i in range(48)]
    task = asyncio.ensure_future(embedder.execute("embedding", chunks))
    await asyncio.sleep(0.3)  # the embedder entered: vLLM was moved before it started computing
    during = model_cores(llm)
    assert not task.done(), "the batch ended before the check; make it bigger"
    vectors = await task
    assert during == {int(HOME)} and len(vectors) == 48
    assert await given_back(llm) == set(CORES)
    assert share.cores("sentence_transformers") == CORES  # the models' next batch uses every core too
