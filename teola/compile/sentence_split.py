"""Sentence-aware chunk windows: whole sentences packed up to `chunk_size` tokens, consecutive chunks
sharing the whole trailing sentences of the previous one that fit in `overlap` tokens.

This is how LlamaIndex's default splitter (`SentenceSplitter`) sizes chunks, so a RAG app and a
LlamaIndex pipeline with the same chunk_size / chunk_overlap index a document in about the same
number of chunks: a chunk ends at a sentence end, so most chunks hold fewer than `chunk_size`
tokens, and the overlap never cuts a sentence (it may be empty when the last sentence is longer than
`overlap`). A sentence longer than `chunk_size` is packed and overlapped word by word instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

# A token as chunking sees it (teola.compile.chunking.Piece): [start, end) offsets, starts a word.
Piece = tuple[int, int, bool]

# A sentence ends at ., ! or ? (and any closing quotes or brackets) before whitespace, or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")


def sentence_spans(text: str) -> list[int]:
    """Character offsets where a new sentence starts (after the first)."""
    return [m.end() for m in _SENTENCE_END.finditer(text) if 0 < m.end() < len(text)]


def sentence_units(pieces: Sequence[Piece], starts: list[int], chunk_size: int) -> list[tuple[int, int]]:
    """Piece-index ranges [a, b) of the sentences, each at most `chunk_size` pieces: a longer one
    becomes one unit per word (a word longer than `chunk_size` is cut into windows)."""
    units: list[tuple[int, int]] = []
    a, s = 0, 0
    for i, (begin, _, _) in enumerate(pieces):
        while s < len(starts) and starts[s] <= begin:
            s += 1
            if i > a:
                units += _units(pieces, a, i, chunk_size)
                a = i
    if a < len(pieces):
        units += _units(pieces, a, len(pieces), chunk_size)
    return units


def _units(pieces: Sequence[Piece], a: int, b: int, size: int) -> list[tuple[int, int]]:
    if b - a <= size:
        return [(a, b)]
    starts = [i for i in range(a + 1, b) if pieces[i][2]]
    out = []
    for x, y in zip([a, *starts], [*starts, b]):
        out += [(k, min(k + size, y)) for k in range(x, y, size)]
    return out


def sentence_windows(
    pieces: Sequence[Piece], text: str, chunk_size: int, overlap: int
) -> Iterator[tuple[int, int]]:
    """Piece-index ranges [a, b) of the chunks of `text` (whose tokens are `pieces`), one at a time
    (the caller may stop at a limit)."""
    units = sentence_units(pieces, sentence_spans(text), chunk_size)
    u = 0
    while u < len(units):
        end, total = u, 0
        while end < len(units) and total + _len(units[end]) <= chunk_size:
            total += _len(units[end])
            end += 1
        yield units[u][0], units[end - 1][1]
        if end >= len(units):
            return
        # the trailing sentences that fit in the overlap start the next chunk, as long as the next
        # new sentence still fits beside them (every chunk holds something new)
        back, carried, room = end, 0, chunk_size - _len(units[end])
        while back - 1 > u and carried + _len(units[back - 1]) <= min(overlap, room):
            back -= 1
            carried += _len(units[back])
        u = back


def _len(unit: tuple[int, int]) -> int:
    return unit[1] - unit[0]
