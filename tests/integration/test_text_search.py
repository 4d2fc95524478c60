"""TextSearchEngine over the bundled Wikipedia corpus, the corpus loaders, the wikipedia tool."""

from __future__ import annotations

import psycopg
import pytest

from engines.assets.corpora import load_boolq, load_questions, load_wiki_summaries
from engines.search.text_search import TextSearchEngine
from engines.tools.tool_engine import ToolEngine

OBVIOUS = {
    "Tour de France cycling race": "Tour de France",
    "Stanley Kubrick science fiction film 2001": "2001: A Space Odyssey",
    "photosynthesis": "Photosynthesis",
    "Albert Einstein": "Albert Einstein",
}


async def test_obvious_queries_find_their_article(text_search):
    queries = list(OBVIOUS)
    results = await text_search.execute("searching", [{"query": q, "top_k": 3} for q in queries])
    for q, hits in zip(queries, results):
        assert hits, q
        assert hits[0]["title"] == OBVIOUS[q], (q, [h["title"] for h in hits])
        assert set(hits[0]) == {"text", "score", "title"}
        assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


async def test_natural_question_ranks_the_article_high(text_search):
    req = {"query": "Who developed the theory of relativity? Einstein", "top_k": 5}
    [hits] = await text_search.execute("searching", [req])
    titles = [h["title"] for h in hits]
    assert "Albert Einstein" in titles[:3], titles


async def test_corpus_loaded_once_with_every_article(text_search, pg_dsn):
    expected = len(load_wiki_summaries())
    assert text_search.loaded_rows == expected == 10033
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        row = await (await conn.execute("SELECT count(*) FROM teola_fts_wiki")).fetchone()
    assert row[0] == expected
    again = TextSearchEngine("search2", progress=False)
    await again.start()
    try:
        assert again.loaded_rows == expected and again.load_seconds == 0.0  # reused, not reloaded
    finally:
        await again.stop()


async def test_hostile_and_empty_queries(text_search, pg_dsn):
    reqs = [
        {"query": "'; DROP TABLE teola_fts_wiki; --", "top_k": 2},
        {"query": "the of and", "top_k": 2},
        {"query": "", "top_k": 2},
        {"query": 'state-of-the-art "quoted" -minus o\'neil \\ back & | ! :*', "top_k": 2},
    ]
    results = await text_search.execute("searching", reqs)
    assert len(results) == 4 and results[1] == [] and results[2] == []
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        row = await (await conn.execute("SELECT count(*) FROM teola_fts_wiki")).fetchone()
    assert row[0] == 10033
    with pytest.raises(ValueError, match="NUL"):
        await text_search.execute("searching", [{"query": "a\x00b", "top_k": 1}])
    with pytest.raises(ValueError, match="top_k"):
        await text_search.execute("searching", [{"query": "x", "top_k": "3"}])


async def test_match_all_uses_websearch_syntax(pg_dsn):
    engine = TextSearchEngine("search_all", match="all", progress=False)
    await engine.start()
    try:
        both, excluded = await engine.execute(
            "searching",
            [
                {"query": '"Tour de France"', "top_k": 3},
                {"query": "Kubrick -odyssey", "top_k": 10},
            ],
        )
        assert both[0]["title"] == "Tour de France"
        assert excluded and all("odyssey" not in h["text"].lower() for h in excluded)
    finally:
        await engine.stop()


async def test_wikipedia_tool_uses_the_corpus(pg_dsn):
    tools = ToolEngine("tools", wikipedia={"progress": False})
    await tools.start()
    try:
        hits = await tools.call("wikipedia", query="Tour de France", top_k=2)
        assert hits[0]["title"] == "Tour de France" and "cycl" in hits[0]["text"].lower()
        assert "wikipedia" in [t["name"] for t in tools.tools()]
    finally:
        await tools.stop()


def test_corpus_loaders_read_the_real_files():
    wiki = load_wiki_summaries(n=3)
    assert len(wiki) == 3 and all(r["title"] and r["text"] for r in wiki)
    boolq = load_boolq(4)
    assert len(boolq) == 4 and all(
        isinstance(r["answer"], bool) and r["passage"] and r["question"] for r in boolq
    )
    assert len(load_boolq()) == 3270
    nq = load_questions("nq_open", 5)
    assert len(nq) == 5 and all(r["question"] and r["answers"] and isinstance(r["answers"], list) for r in nq)
    assert len(load_questions("truthfulqa")) == 817
    with pytest.raises(ValueError, match="known: boolq, fiqa, nq_open, truthfulqa"):
        load_questions("squad", 1)
    with pytest.raises(ValueError, match="n=-1"):
        load_boolq(-1)
