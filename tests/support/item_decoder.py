"""`ItemDecoder`: a StepDecoder (engines.sim.step_decoder) that also runs partial decodes, for
scheduling tests of decode pipelining. Its output is a bulleted list whose item j is
"item<j> whole", 4 tokens a line: token k is piece k % 4 of line k // 4 ("- ", "item<j>",
" whole", "\\n"), so a resumed call (`resume_ids`) continues the list where it stopped. Its items
are cut as the vLLM adapter cuts them (engines.llm_text.batch_stream.Decoded): each one as its
newline comes, at most `max_items`, and at the end the unfinished last line too, also when the
call was aborted mid-line ("item<j>" without " whole")."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from engines.llm_text.batch_stream import Decoded
from engines.requests import PrimOp
from engines.sim.step_decoder import StepDecoder

PIECES = ("- ", "item{j}", " whole", "\n")


def piece(k: int) -> str:
    """The text of output token k."""
    return PIECES[k % 4].format(j=k // 4)


def item(j: int) -> str:
    return f"item{j} whole"


class ItemDecoder(StepDecoder):
    ops = frozenset({PrimOp.DECODING, PrimOp.PARTIAL_DECODING})

    async def _one(self, op: str, i: int, req: dict[str, Any],
                   emit: Callable[[int, str, Any], Awaitable[None]] | None) -> dict[str, Any]:
        if op != PrimOp.PARTIAL_DECODING:
            return await super()._one(op, i, req, emit)
        keys = {k for k in (req.get("owner"), req.get("tag")) if k}
        start = len(req.get("resume_ids") or [])
        out = Decoded(i, {"split": req.get("split"), "max_items": req.get("max_items"),
                          "stream_text": bool(req.get("stream_text")), "progress": bool(req.get("progress"))}, emit)
        aborted = False
        self.running += 1
        self.peak = max(self.peak, self.running)
        for k in keys:
            self._live[k] = self._live.get(k, 0) + 1
        try:
            for k in range(start, start + int(req["max_tokens"])):
                await asyncio.sleep(self.step)
                if keys & self._stop:
                    aborted = True
                    break
                if await out.feed(piece(k), [k]):
                    break  # every item asked for is out
        finally:
            self.running -= 1
            for k in keys:
                self._live[k] -= 1
                if not self._live[k]:
                    del self._live[k]
                    self._stop.discard(k)
        result = {"text": "".join(out.text), "items": await out.items(), "num_output_tokens": out.tokens,
                  "output_token_ids": out.token_ids, "num_prompt_tokens": start, "num_cached_tokens": 0}
        if aborted:
            result["aborted"] = True
        else:
            self.finished.append(req.get("tag") or req.get("owner") or "")
        if emit is not None:
            await emit(i, "final", result)
        return result
