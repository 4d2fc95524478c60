"""When a partial prefill can be answered without the engine.

A partial prefill (pass `prefill_split`) computes a prompt prefix early so that the call's full
prefill finds it in the engine's prefix cache. vLLM caches whole KV blocks only, so a prefix
shorter than one block leaves nothing behind, and a prefix this adapter sent moments ago is most
likely cached already. Sending either costs a request that waits in the engine's queue like any
other, and the full prefill waits for it: under load that adds a whole queueing round to the
query's critical path for no saved work (measured with naive RAG: a 28-token chat-template prefix
at block size 32 took 9.4 s per query at saturation). `PrefixMemo` names such prefixes so the
adapter can answer them at once.

"Sent before" is a memo of this adapter's own requests, not a look into vLLM's cache: if vLLM has
evicted the blocks, or the prefill that noted them failed or was aborted, the full prefill computes
them, as it would have without the partial prefill.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

TOO_SHORT = "shorter than one KV block"
SENT_BEFORE = "prefix sent before"


class PrefixMemo:
    """The cacheable prefixes (whole blocks) of the partial prefills sent recently, newest last."""

    def __init__(self, block_size: int, capacity: int = 4096) -> None:
        if block_size < 1 or capacity < 1:
            raise ValueError(
                f"PrefixMemo needs block_size >= 1 and capacity >= 1, got {block_size}, {capacity}"
            )
        self.block_size = block_size
        self.capacity = capacity
        self._seen: OrderedDict[tuple, None] = OrderedDict()

    def _key(self, ids: Sequence[int], salt: str | None) -> tuple | None:
        full = len(ids) // self.block_size * self.block_size
        return (salt, tuple(ids[:full])) if full else None

    def skip_reason(self, ids: Sequence[int], salt: str | None = None) -> str | None:
        """Why a partial prefill of `ids` need not reach the engine, or None if it should."""
        key = self._key(ids, salt)
        if key is None:
            return TOO_SHORT
        if key in self._seen:
            self._seen.move_to_end(key)
            return SENT_BEFORE
        return None

    def answer(self, ids: Sequence[int], salt: str | None = None) -> dict[str, Any] | None:
        """A partial prefill's result without the engine ("skipped" names why), or None: send it
        (it is noted as sent)."""
        skipped = self.skip_reason(ids, salt)
        if skipped is None:
            self.note(ids, salt)
            return None
        return {"num_prompt_tokens": len(ids), "num_cached_tokens": 0, "skipped": skipped}

    def note(self, ids: Sequence[int], salt: str | None = None) -> None:
        """Remember a partial prefill that is being sent."""
        key = self._key(ids, salt)
        if key is None:
            return
        self._seen[key] = None
        self._seen.move_to_end(key)
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)

    def clear(self) -> None:
        """Forget everything (the engine's prefix cache was emptied)."""
        self._seen.clear()
