"""Token-aware chunking of documents (sliding windows over tokens, text kept verbatim).

Tokens are the embedding model's when a tokenizer is given (`teola.compile.chunk_tokenizer`), else
words and punctuation marks (`count_tokens`)."""
from __future__ import annotations

import functools
import re
from typing import Protocol

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


# A token as chunking sees it: its [start, end) character offsets in the text and whether it
# starts a word (False for a subword piece that continues the word before it).
Piece = tuple[int, int, bool]


class ChunkTokenizer(Protocol):
    """A tokenizer as chunking uses it. It must be hashable (chunks are memoized per tokenizer)."""

    def pieces(self, text: str) -> list[Piece]:
        """`text`'s tokens in order."""
        ...


def count_tokens(text: str) -> int:
    """Approximate LLM token count: words and punctuation marks (BPE tokenizers are close to this
    for English prose; the chunk limits are budgets, not exact model lengths)."""
    return len(_TOKEN.findall(text))


def word_pieces(text: str) -> list[Piece]:
    """`text`'s words and punctuation marks (what `count_tokens` counts), each a word of its own."""
    return [(m.start(), m.end(), True) for m in _TOKEN.finditer(text)]


def chunk_text(text: str, chunk_size: int = 256, overlap: int = 30,
               tokenizer: ChunkTokenizer | None = None) -> list[str]:
    """Split `text` into windows of at most `chunk_size` tokens, consecutive windows sharing about
    `overlap` tokens. Each chunk is the exact source substring its tokens span. Tokens are
    `tokenizer`'s (e.g. the embedding model's), or words and punctuation marks when it is None; a
    window ends and starts at word boundaries unless one word fills it."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if not 0 <= overlap < chunk_size:
        raise ValueError(f"overlap must be in [0, chunk_size), got {overlap} with chunk_size {chunk_size}")
    if len(text) > _MEMO_CHARS:
        return list(_chunks(text, chunk_size, overlap, tokenizer))
    return list(_memo_chunks(text, chunk_size, overlap, tokenizer))


def _chunks(text: str, chunk_size: int, overlap: int, tokenizer: ChunkTokenizer | None) -> tuple[str, ...]:
    pieces = word_pieces(text) if tokenizer is None else tokenizer.pieces(text)
    chunks: list[str] = []
    i = 0
    while i < len(pieces):
        end = _word_end(pieces, i, i + chunk_size)
        chunks.append(text[pieces[i][0]:pieces[end - 1][1]])
        if end >= len(pieces):
            break
        i = _word_start(pieces, max(i + 1, end - overlap), end)
    return tuple(chunks)


def _word_end(pieces: list[Piece], start: int, end: int) -> int:
    """`end`, moved back to the start of the word it would cut (kept when no word starts after `start`)."""
    if end >= len(pieces):
        return len(pieces)
    for e in range(end, start, -1):
        if pieces[e][2]:
            return e
    return end


def _word_start(pieces: list[Piece], i: int, limit: int) -> int:
    """`i`, moved forward to the next word start at or before `limit` (kept when there is none)."""
    for s in range(i, limit + 1):
        if pieces[s][2]:
            return s
    return i


# The same documents are often chunked again (a corpus re-sent with every query, simulations):
# chunks of texts up to _MEMO_CHARS long are kept for the most recent 1,024 (text, sizes, tokenizer).
_MEMO_CHARS = 100_000
_memo_chunks = functools.lru_cache(maxsize=1024)(_chunks)


def document_text(doc: object, index: int) -> str:
    """A document may be a string or {"text": str, ...}."""
    if isinstance(doc, str):
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("text"), str):
        return doc["text"]
    raise TypeError(f"query['documents'][{index}] must be a string or {{'text': str}}, got {type(doc).__name__}")
