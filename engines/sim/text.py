"""What a simulated LLM reads and writes: prompt token ids derived from the prompt text, and outputs
of a sampled length with the shape the app expects.

Token ids: the prompt's words and punctuation marks (`teola.compile.chunking`'s count), each worth `ratio`
LLM tokens on average (SmolLM2's BPE: 1.12-1.16 per counted token on the shipped corpora), after a
fixed number of chat-template tokens. A partial prompt (the first parts) yields a prefix of the full
prompt's ids, as with the real renderer, so prefix caching behaves alike.

Outputs: a split ("list") output is numbered lines, one per item, its tokens spread over the items;
other outputs are plain words. Token k of an output always has the same id and text, so a call
resumed after preemption continues exactly where it stopped.
"""

from __future__ import annotations

import functools
import random
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
SYSTEM_PART_NAMES = ("instruction", "system")


@functools.lru_cache(maxsize=1 << 14)  # simulations count the same texts again and again
def count_tokens(text: str) -> int:
    """Words and punctuation marks (teola.compile.chunking's count, which engines/ cannot import)."""
    return len(_TOKEN.findall(text))


@functools.lru_cache(maxsize=1 << 14)
def _piece_hashes(text: str) -> tuple[int, ...]:
    return tuple(zlib.crc32(piece.encode()) for piece in _TOKEN.findall(text))


@functools.lru_cache(maxsize=1 << 14)
def text_ids(text: str, ratio: float = 1.15) -> tuple[int, ...]:
    """Pseudo ids of one text: `ratio` ids per counted token on average (each text counted from its
    own start, so a text has the same ids wherever it appears)."""
    out: list[int] = []
    for n, h in enumerate(_piece_hashes(text)):
        out.extend((h + j) & 0x7FFFFFFF for j in range(int((n + 1) * ratio) - int(n * ratio)))
    return tuple(out)


def memo_caches() -> tuple:
    """This module's memoized functions (engines.sim.sim_engine.clear_memos empties them)."""
    return (count_tokens, _piece_hashes, text_ids)


ASSISTANT_TURN = (
    2_000_000,
    2_000_001,
    2_000_002,
)  # the assistant turn's opening tokens, ending a complete prompt


def prompt_ids(
    parts: Sequence[tuple[str, str]], complete: bool, ratio: float = 1.15, template_tokens: int = 12
) -> list[int]:
    """Pseudo token ids of a prompt (see the module docstring)."""
    ids = [1_000_000 + k for k in range(template_tokens)]
    for _, text in parts:
        ids.extend(text_ids(text, ratio))
    if complete:
        ids.extend(ASSISTANT_TURN)
    return ids


PAD_ID = 2_500_000


def resize_prompt(ids: Sequence[int], n: int, tail: int = 0) -> list[int]:
    """`ids` made `n` long: tokens cut, or pad ids added, just before the last `tail` ids (the assistant
    turn's opening), so the prompt's start, what a prefix cache matches, stays as it was."""
    cut = len(ids) - tail
    keep = max(0, n - tail)
    head = list(ids[: min(cut, keep)]) + [PAD_ID] * max(0, keep - cut)
    return head + list(ids[cut:])


def continuation_ids(segments: Sequence[str | list[int]], ratio: float = 1.15) -> list[int]:
    """Ids of what follows a prompt in a call continued after a pause: id lists as they are, texts
    (tool results) as pseudo ids counted like a prompt's."""
    out: list[int] = []
    for seg in segments:
        out.extend(seg if isinstance(seg, list) else text_ids(seg, ratio))
    return out


def output_token(k: int, split: str | None, n_items: int, total: int, topic: str) -> str:
    """The text of token k of an output of `total` tokens."""
    if split is None:
        return "answer " if k == 0 else f"{topic}{k} "
    per = max(1, total // max(1, n_items))
    item, pos = divmod(k, per)
    if item >= n_items:
        item, pos = n_items - 1, k - (n_items - 1) * per
    end = k == total - 1 or (pos == per - 1 and item < n_items - 1)
    text = f"{item + 1}. {topic}" if pos == 0 else f" v{item + 1}w{pos}"
    return text + ("\n" if end else "")


def output_id(k: int) -> int:
    return 3_000_000 + k


class LengthSampler:
    """Output lengths drawn from recorded ones: `lengths` maps a kind ("split" for item lists,
    "text" otherwise, or "default") to observed output-token counts (an empirical CDF). A call's
    length is a pure function of its prompt and `seed`, like a greedy decode. Without samples
    for a kind the call decodes its max_tokens."""

    def __init__(self, lengths: Mapping[str, Sequence[int]] | None = None, seed: int = 0) -> None:
        self.lengths = {k: sorted(int(x) for x in v) for k, v in (lengths or {}).items() if v}
        for kind, values in self.lengths.items():
            if values[0] < 1:
                raise ValueError(f"output lengths of kind {kind!r} must be >= 1 tokens, got {values[0]}")
        self.seed = seed

    def prompt_tokens(self, kind: str, key: str) -> int | None:
        """The prompt length a replayed trace gives this call; None: the prompt's own (a sampler
        never changes prompts; a replay of recorded calls may)."""
        return None

    def sample(self, kind: str, key: str, max_tokens: int) -> int:
        values = self.lengths.get(kind) or self.lengths.get("default")
        if not values:
            return max_tokens
        u = random.Random(zlib.crc32(f"{self.seed}:{key}".encode())).random()
        return max(1, min(max_tokens, values[min(len(values) - 1, int(u * len(values)))]))


def request_token_ids(request: dict[str, Any], field: str) -> list[int] | None:
    """A request's `field` (None when absent), checked: a non-empty list of token ids >= 0."""
    ids = request.get(field) if isinstance(request, dict) else None
    if ids is not None and (
        not isinstance(ids, list) or not ids or set(map(type, ids)) != {int} or min(ids) < 0
    ):
        raise ValueError(
            f"request {field!r} must be a non-empty list of token ids (ints >= 0), got {ids!r:.80}"
        )
    return ids
