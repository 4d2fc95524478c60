"""Token-aware chunking of documents (sliding windows over tokens, text kept verbatim)."""
from __future__ import annotations

import functools
import re

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def count_tokens(text: str) -> int:
    """Approximate LLM token count: words and punctuation marks (BPE tokenizers are close to this
    for English prose; the chunk limits are budgets, not exact model lengths)."""
    return len(_TOKEN.findall(text))


def chunk_text(text: str, chunk_size: int = 256, overlap: int = 30) -> list[str]:
    """Split `text` into windows of at most `chunk_size` tokens, consecutive windows sharing
    `overlap` tokens. Each chunk is the exact source substring its tokens span."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if not 0 <= overlap < chunk_size:
        raise ValueError(f"overlap must be in [0, chunk_size), got {overlap} with chunk_size {chunk_size}")
    if len(text) > _MEMO_CHARS:
        return list(_chunks(text, chunk_size, overlap))
    return list(_memo_chunks(text, chunk_size, overlap))


def _chunks(text: str, chunk_size: int, overlap: int) -> tuple[str, ...]:
    spans = [m.span() for m in _TOKEN.finditer(text)]
    if not spans:
        return ()
    chunks, step, i = [], chunk_size - overlap, 0
    while True:
        window = spans[i:i + chunk_size]
        chunks.append(text[window[0][0]:window[-1][1]])
        if i + chunk_size >= len(spans):
            return tuple(chunks)
        i += step


# The same documents are often chunked again (a corpus re-sent with every query, simulations):
# chunks of texts up to _MEMO_CHARS long are kept for the most recent 1,024 (text, sizes).
_MEMO_CHARS = 100_000
_memo_chunks = functools.lru_cache(maxsize=1024)(_chunks)


def document_text(doc: object, index: int) -> str:
    """A document may be a string or {"text": str, ...}."""
    if isinstance(doc, str):
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("text"), str):
        return doc["text"]
    raise TypeError(f"query['documents'][{index}] must be a string or {{'text': str}}, got {type(doc).__name__}")
