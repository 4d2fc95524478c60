"""Chunking cannot multiply a query's documents in memory (issue 71, finding 1): chunk_overlap is at
most half a chunk, the chunk count and the characters the chunks hold are bounded inside the loop
that makes them, and the chunk memo keeps nothing of a refused query and at most MEMO_CHARS."""

from __future__ import annotations

import gc
import tracemalloc

import psutil
import pytest

from apps.naive_rag import build as build_naive_rag
from teola.compile import chunking
from teola.compile.chunking import chunk_text

PROSE = "The Ouse flows through York; its tributaries include the Swale, the Ure and the Nidd. "


class CharTokenizer:
    """A fake model tokenizer: every non-space character is a token; a word is a run of them."""

    def pieces(self, text: str) -> list[tuple[int, int, bool]]:
        return [(i, i + 1, i == 0 or text[i - 1].isspace()) for i, c in enumerate(text) if not c.isspace()]


def doc(chars: int, seed: int = 0) -> str:
    return (f"Document {seed}. " + PROSE * (chars // len(PROSE) + 1))[:chars]


def words_config(**indexing: int) -> dict:
    return {"nodes": {"indexing": {"tokenizer": "words", **indexing}}}


def test_the_reviewed_overlap_is_refused_by_the_config_schema():
    app = build_naive_rag()
    with pytest.raises(ValueError, match=r"config\.nodes\.indexing\.chunk_overlap: "):
        app.compile(
            {"question": "q", "documents": [doc(6000)]}, words_config(chunk_size=8192, chunk_overlap=8191)
        )
    with pytest.raises(
        ValueError, match=r"config\.nodes\.indexing\.chunk_overlap: .*at most half of chunk_size"
    ):
        app.compile(
            {"question": "q", "documents": [doc(6000)]}, words_config(chunk_size=1000, chunk_overlap=999)
        )
    with pytest.raises(ValueError, match=r"config\.nodes\.indexing\.chunk_overlap: .*256 // 2 = 128"):
        app.compile({"question": "q", "documents": [doc(600)]}, words_config(chunk_overlap=129))
    chunks = app.compile(
        {"question": "q", "documents": [doc(6000)]}, words_config(chunk_size=64, chunk_overlap=32)
    ).inputs["indexing.chunks"]
    assert sum(map(len, chunks)) <= 2.2 * 6000  # half-overlapping windows repeat the text about twice


def test_a_window_cut_short_by_a_long_word_does_not_repeat_its_tail_once_per_token():
    # 4096 one-token words, then one word of 5000 subword tokens: before the fix the windows [k, 4096)
    # for every k made 4096 chunks holding 8.4 M characters out of a 13 KB text
    text = "a " * 4096 + "b" * 5000
    chunks = chunk_text(text, 8192, 4096, CharTokenizer(), split="window")
    assert sum(map(len, chunks)) <= 3 * len(text)
    assert chunks[0] == text[: 2 * 4096 - 1] and "".join(chunks[1:]) == "b" * 5000
    # packed word by word (one sentence longer than a chunk): the overlap shrinks so the long word fits
    chunks = chunk_text(text, 8192, 4096, CharTokenizer(), split="sentence")
    assert sum(map(len, chunks)) <= 3 * len(text)
    assert chunks[0] == text[: 2 * 4096 - 1] and chunks[-1].endswith("b" * 5000) and len(chunks) == 2


def peak_while(work) -> int:
    """Peak bytes allocated while `work()` runs."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("split", chunking.SPLITS)
def test_chunking_stops_at_the_limits_inside_its_loop(split):
    text = " ".join(
        f"{i:06d}" + "x" * 993 for i in range(1000)
    )  # 1 MB in 1,000 words: chunks dominate memory

    def refused() -> None:
        with pytest.raises(chunking.ChunkLimitError) as refusal:
            chunking.chunk_documents([text], 10, 5, None, max_chunks=10, split=split)
        assert refusal.value.what == "chunks" and refusal.value.limit == 10

    whole = peak_while(lambda: chunking.chunk_documents([text], 10, 5, None, split=split))
    assert whole > 1_500_000  # ~200 chunks of 10 KB
    assert peak_while(refused) < 500_000  # 11 chunks, then the loop stopped
    with pytest.raises(chunking.ChunkLimitError, match="more than 1000 characters"):
        chunking.chunk_documents([doc(5000)], 64, 32, None, max_chars=1000)
    bounded = chunking.chunk_documents([doc(5000)], 64, 32, None, max_chunks=1000, max_chars=20_000)
    assert bounded == chunk_text(doc(5000), 64, 32)


def test_a_query_whose_chunks_would_hold_more_than_three_times_its_text_is_refused(monkeypatch):
    from teola.compile import decompose

    monkeypatch.setattr(decompose, "MAX_CHUNK_TEXT_RATIO", 1)  # overlapping windows hold more than the text
    with pytest.raises(
        ValueError, match=r"node 'indexing': .*more than 1 times the documents' text.*chunk_overlap"
    ):
        build_naive_rag().compile({"question": "q", "documents": [doc(3000)]}, words_config(chunk_size=64))


def retained_after(work) -> int:
    """Bytes still allocated after `work()` and a collection."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        work()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_refused_queries_leave_nothing_in_the_chunk_memo():
    app = build_naive_rag()

    def refused_queries() -> None:
        for seed in range(25):  # 25 distinct 90 KB documents, each query over its chunk limit
            with pytest.raises(ValueError, match="more than 20 chunks"):
                app.compile({"question": "q", "documents": [doc(90_000, seed)]}, words_config(max_chunks=20))

    assert retained_after(refused_queries) < 2 * 1024 * 1024  # 25 x (90 KB + its chunks) before the fix


def test_the_chunk_memo_is_bounded_by_the_characters_it_holds(monkeypatch):
    memo = chunking.memo()
    memo.clear()
    monkeypatch.setattr(memo, "max_chars", 2_000_000)
    app = build_naive_rag()

    def accepted_queries() -> None:
        # 25 distinct 90 KB documents: 4.7 M characters of text and chunks (an unbounded memo grew 4.8 MB)
        for seed in range(25):
            app.compile({"question": "q", "documents": [doc(90_000, seed)]}, words_config())

    grown = retained_after(accepted_queries)
    assert memo.chars <= 2_000_000 and grown < 3_000_000, (memo.chars, grown)
    app.compile({"question": "q", "documents": [doc(90_000, 24)]}, words_config())
    assert memo.hits >= 1  # the most recent ones are still served from it


async def test_the_reviewed_probe_is_refused_at_once_without_growing_the_server():
    """The review's probe on the real server code: one 60 KB document with chunk_size 8192 and
    chunk_overlap 8191 (11,809 chunks, 290 MB, no answer in 10 s and +470 MiB before the fix)."""
    import asyncio

    import httpx

    from engines.sim.sim_engine import SimEngine
    from teola import Engine
    from teola.server import ServerSettings, create_server

    app = build_naive_rag()
    for name, spec in list(app.engines.items()):
        app.register_engine(Engine(name, kind=spec.kind, **spec.options), backend=SimEngine(name))
    server = create_server({"rag": app}, ServerSettings(documents="memory", query_timeout=60))
    body = {
        "query": {"question": "What flows through York?", "documents": [doc(60_000)]},
        "config": {"nodes": {"indexing": {"chunk_size": 8192, "chunk_overlap": 8191}}},
    }
    async with server.router.lifespan_context(server):
        transport = httpx.ASGITransport(app=server)
        async with httpx.AsyncClient(transport=transport, base_url="http://teola.test", timeout=60) as client:
            rss = psutil.Process().memory_info().rss
            r = await asyncio.wait_for(client.post("/v1/apps/rag/query", json=body), timeout=10)
            grown = psutil.Process().memory_info().rss - rss
    assert r.status_code == 422, r.text[:300]
    assert "config.nodes.indexing.chunk_overlap" in r.json()["detail"]
    assert grown < 50 * 1024 * 1024
