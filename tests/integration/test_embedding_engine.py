"""EmbeddingEngine on the real MiniLM: one model call per batch, normalized vectors, meaningful similarity."""

import asyncio

import numpy as np
import pytest

from engines.sentence_transformers.embedding import EmbeddingEngine

pytestmark = pytest.mark.engines


async def test_batch_of_64_is_one_model_call(embedding_engine):
    texts = [f"document number {i} about topic {i % 7}" for i in range(64)]
    calls, forwards = len(embedding_engine.calls), len(embedding_engine.forward_batches)
    vectors = await embedding_engine.execute("embedding", [{"text": t} for t in texts])
    assert embedding_engine.calls[calls:] == [64]
    assert embedding_engine.forward_batches[forwards:] == [64]
    assert len(vectors) == 64 and all(len(v) == embedding_engine.dimension == 384 for v in vectors)
    assert all(isinstance(x, float) for x in vectors[0])
    assert np.allclose(np.linalg.norm(np.array(vectors), axis=1), 1.0, atol=1e-4)


async def test_similar_texts_are_closer(embedding_engine):
    cat, kitten, market = await embedding_engine.execute(
        "embedding",
        [
            {"text": "A cat sleeps on the sofa."},
            {"text": "A kitten naps on the couch."},
            {"text": "Stock markets fell sharply on Monday."},
        ],
    )
    assert np.dot(cat, kitten) > np.dot(cat, market) + 0.2


async def test_results_keep_request_order(embedding_engine):
    a, b = await embedding_engine.execute("embedding", [{"text": "alpha"}, {"text": "beta"}])
    [b2] = await embedding_engine.execute("embedding", [{"text": "beta"}])
    assert np.allclose(b, b2, atol=1e-5) and not np.allclose(a, b, atol=1e-3)


async def test_event_loop_stays_free_while_encoding(embedding_engine):
    ticks = 0
    done = False

    async def ticker():
        nonlocal ticks
        while not done:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(ticker())
    before = ticks
    await embedding_engine.execute("embedding", [{"text": "a fairly long sentence " * 20}] * 128)
    during = ticks - before
    done = True
    await task
    assert during > 1


async def test_bad_requests_fail_clearly(embedding_engine):
    with pytest.raises(ValueError, match="text"):
        await embedding_engine.execute("embedding", [{"text": "ok"}, {"query": "no text"}])
    with pytest.raises(ValueError, match="embedding"):
        await embedding_engine.execute("reranking", [{"text": "x"}])
    with pytest.raises(ValueError, match="max_batch"):
        EmbeddingEngine("e", max_batch=0)


async def test_unstarted_engine_says_how_to_start():
    with pytest.raises(RuntimeError, match="start"):
        await EmbeddingEngine("e").execute("embedding", [{"text": "x"}])
