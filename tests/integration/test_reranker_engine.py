"""RerankerEngine: the offline MiniLM-cosine default ranks relevant text first; CrossEncoder paths load."""

import pytest

from engines.assets.models import resolve_model
from engines.sentence_transformers.reranker import RerankerEngine

pytestmark = pytest.mark.engines

QUERY = "What is the boiling point of water at sea level?"
TEXTS = [
    "Water boils at 100 degrees Celsius at sea level.",
    "The Eiffel Tower is located in Paris.",
    "Bananas are rich in potassium.",
    "The stock market closed higher today.",
]


async def test_relevant_text_ranks_first(reranker_engine):
    assert reranker_engine.mode == "bi_encoder_cosine"
    scores = await reranker_engine.execute("reranking", [{"query": QUERY, "text": t} for t in TEXTS])
    assert len(scores) == 4 and all(isinstance(s, float) for s in scores)
    assert max(range(4), key=scores.__getitem__) == 0
    assert scores[0] > max(scores[1:]) + 0.2


async def test_mixed_queries_in_one_batch_are_one_call(reranker_engine):
    n = len(reranker_engine.calls)
    scores = await reranker_engine.execute(
        "reranking",
        [{"query": QUERY, "text": TEXTS[1]}, {"query": "Where is the Eiffel Tower?", "text": TEXTS[1]}],
    )
    assert reranker_engine.calls[n:] == [2]
    assert scores[1] > scores[0]


async def test_bad_requests_fail_clearly(reranker_engine):
    with pytest.raises(ValueError, match="query"):
        await reranker_engine.execute("reranking", [{"text": "no query"}])
    with pytest.raises(ValueError, match="reranking"):
        await reranker_engine.execute("embedding", [{"query": "q", "text": "t"}])


async def test_cross_encoder_path_is_used_when_configured():
    """Any sentence-transformers CrossEncoder folder loads (here MiniLM with an untrained head: only the
    plumbing is checked, not the scores)."""
    engine = RerankerEngine("ce", model=str(resolve_model("all-minilm-l6-v2")))
    await engine.start()
    try:
        assert engine.mode == "cross_encoder"
        scores = await engine.execute("reranking", [{"query": QUERY, "text": t} for t in TEXTS[:2]])
        assert len(scores) == 2 and all(isinstance(s, float) for s in scores)
        assert engine.calls == [2]
    finally:
        await engine.stop()


async def test_the_cross_encoder_shape_scores_pairs_jointly_the_same_in_every_run_and_ranks_by_no_cosine():
    from engines.registry import kind_ranks_by

    pairs = [{"query": QUERY, "text": t} for t in TEXTS]
    runs = []
    for _ in range(2):
        engine = RerankerEngine("shape", cross_encoder_shape=True)
        await engine.start()
        try:
            assert engine.mode == "cross_encoder_shape" and engine.ranking == ""
            runs.append(await engine.execute("reranking", pairs))
            assert engine.calls == [4]
        finally:
            await engine.stop()
    assert runs[0] == runs[1] and len(set(runs[0])) == 4  # seeded head; each pair its own score
    assert kind_ranks_by("reranker", {"cross_encoder_shape": True}) == ""  # so the expansion is never pruned
    assert kind_ranks_by("reranker", {}) == "cosine:all-minilm-l6-v2"
    with pytest.raises(ValueError, match="not both"):
        RerankerEngine("bad", model="x", cross_encoder_shape=True)
