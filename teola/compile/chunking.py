"""Token-aware chunking of documents (sliding windows over tokens, text kept verbatim).

Tokens are the embedding model's when a tokenizer is given (`teola.compile.chunk_tokenizer`), else
words and punctuation marks (`count_tokens`)."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Protocol

from teola.compile.sentence_split import sentence_windows

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


# A token as chunking sees it: its [start, end) character offsets in the text and whether it
# starts a word (False for a subword piece that continues the word before it).
Piece = tuple[int, int, bool]  # the same alias as teola.compile.sentence_split's


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


# "sentence" (the default): whole sentences up to chunk_size, as LlamaIndex's SentenceSplitter sizes
# chunks (teola.compile.sentence_split); "window": sliding windows of chunk_size tokens cut at words.
SPLITS = ("sentence", "window")
DEFAULT_SPLIT = "sentence"


def chunk_text(
    text: str,
    chunk_size: int = 256,
    overlap: int = 30,
    tokenizer: ChunkTokenizer | None = None,
    *,
    max_chunks: int | None = None,
    max_chars: int | None = None,
    split: str = DEFAULT_SPLIT,
) -> list[str]:
    """Split `text` into chunks of at most `chunk_size` tokens, consecutive chunks sharing up to
    `overlap` tokens. Each chunk is the exact source substring its tokens span. Tokens are
    `tokenizer`'s (e.g. the embedding model's), or words and punctuation marks when it is None.
    split="sentence" (default) packs whole sentences and overlaps by whole sentences
    (`teola.compile.sentence_split`); split="window" slides windows of `chunk_size` tokens that end
    and start at word boundaries unless one word fills one. With `max_chunks` or `max_chars`,
    chunking stops with `ChunkLimitError` as soon as the chunks would pass either."""
    return chunk_documents(
        [text], chunk_size, overlap, tokenizer, max_chunks=max_chunks, max_chars=max_chars, split=split
    )


class ChunkLimitError(ValueError):
    """Chunking stopped at a limit: the chunks would number more than `limit` ("chunks") or hold
    more than `limit` characters ("characters")."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"the chunks would hold more than {limit} {what}")
        self.what = what
        self.limit = limit


def chunk_documents(
    texts: list[str],
    chunk_size: int,
    overlap: int,
    tokenizer: ChunkTokenizer | None = None,
    *,
    max_chunks: int | None = None,
    max_chars: int | None = None,
    split: str = DEFAULT_SPLIT,
) -> list[str]:
    """The chunks of every text in order (`chunk_text` of each), at most `max_chunks` of them
    holding at most `max_chars` characters together: past either, `ChunkLimitError` from inside the
    loop that makes them, so a refused request never holds more than the limits. Texts up to
    `MEMO_TEXT_CHARS` long are memoized, but only once all of them were chunked within the limits."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if not 0 <= overlap < chunk_size:
        raise ValueError(f"overlap must be in [0, chunk_size), got {overlap} with chunk_size {chunk_size}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    budget = _Budget(max_chunks, max_chars)
    out: list[str] = []
    fresh: list[tuple[tuple, tuple[str, ...]]] = []
    for text in texts:
        key = (text, chunk_size, overlap, tokenizer, split)
        memoized = _memo.get(key) if len(text) <= MEMO_TEXT_CHARS else None
        if memoized is not None:
            for chunk in memoized:
                budget.take(chunk)
        else:
            memoized = _chunks(text, chunk_size, overlap, tokenizer, budget, split)
            if len(text) <= MEMO_TEXT_CHARS:
                fresh.append((key, memoized))
        out.extend(memoized)
    for key, chunks in fresh:
        _memo.put(key, chunks)
    return out


class _Budget:
    """What the chunks of one call may still take (None: no bound)."""

    __slots__ = ("chunks", "chars", "max_chunks", "max_chars")

    def __init__(self, max_chunks: int | None, max_chars: int | None) -> None:
        self.max_chunks, self.max_chars = max_chunks, max_chars
        self.chunks = self.chars = 0

    def take(self, chunk: str) -> None:
        self.chunks += 1
        self.chars += len(chunk)
        if self.max_chunks is not None and self.chunks > self.max_chunks:
            raise ChunkLimitError("chunks", self.max_chunks)
        if self.max_chars is not None and self.chars > self.max_chars:
            raise ChunkLimitError("characters", self.max_chars)


def _chunks(
    text: str, chunk_size: int, overlap: int, tokenizer: ChunkTokenizer | None, budget: _Budget, split: str
) -> tuple[str, ...]:
    pieces = word_pieces(text) if tokenizer is None else tokenizer.pieces(text)
    if split == "sentence":
        out = []
        for a, b in sentence_windows(pieces, text, chunk_size, overlap):
            out.append(text[pieces[a][0] : pieces[b - 1][1]])
            budget.take(out[-1])
        return tuple(out)
    chunks: list[str] = []
    i = 0
    while i < len(pieces):
        end = _word_end(pieces, i, i + chunk_size)
        chunk = text[pieces[i][0] : pieces[end - 1][1]]
        budget.take(chunk)
        chunks.append(chunk)
        if end >= len(pieces):
            break
        # a window cut short by a long word shares nothing with the next: stepping one token at a
        # time inside its overlap would repeat its tail once per token
        back = end - overlap
        i = _word_start(pieces, back, end) if back > i else end
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
# chunks of texts up to MEMO_TEXT_CHARS long are kept, least recently used first out, while the
# texts and chunks kept hold at most MEMO_CHARS characters together.
MEMO_TEXT_CHARS = 100_000
MEMO_CHARS = 16_000_000


class ChunkMemo:
    """A least-recently-used map (text, sizes, tokenizer) -> chunks, bounded by the characters it
    holds; thread-safe (queries compile in worker threads)."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.chars = 0
        self.hits = self.misses = 0
        self._items: OrderedDict[tuple, tuple[str, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> tuple[str, ...] | None:
        with self._lock:
            chunks = self._items.get(key)
            if chunks is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return chunks

    def put(self, key: tuple, chunks: tuple[str, ...]) -> None:
        size = _held(key, chunks)
        if size > self.max_chars:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = chunks
            self.chars += size
            while self.chars > self.max_chars:
                old_key, old = self._items.popitem(last=False)
                self.chars -= _held(old_key, old)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.chars = self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)


def _held(key: tuple, chunks: tuple[str, ...]) -> int:
    return len(key[0]) + sum(len(c) for c in chunks)


_memo = ChunkMemo(MEMO_CHARS)


def memo() -> ChunkMemo:
    """The process's chunk memo."""
    return _memo


def document_text(doc: object, index: int) -> str:
    """A document may be a string or {"text": str, ...}."""
    if isinstance(doc, str):
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("text"), str):
        return doc["text"]
    raise TypeError(
        f"query['documents'][{index}] must be a string or {{'text': str}}, got {type(doc).__name__}"
    )
