"""`ItemDecoder`: a StepDecoder (engines.sim.step_decoder) that also runs partial decodes, for
scheduling tests of decode pipelining. Its output is a bulleted list whose item j is
"item<j> whole", 4 tokens a line: token k is piece k % 4 of line k // 4 ("- ", "item<j>",
" whole", "\\n"), so a resumed call (`resume_ids`) continues the list where it stopped. Its items
are cut as the vLLM adapter cuts them (engines.llm_text.batch_stream.Decoded): each one as its
newline comes, at most `max_items`, and at the end the unfinished last line too, also when the
call was aborted mid-line ("item<j>" without " whole")."""

from __future__ import annotations

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

    async def _one(
        self, op: str, i: int, req: dict[str, Any], emit: Callable[[int, str, Any], Awaitable[None]] | None
    ) -> dict[str, Any]:
        if op != PrimOp.PARTIAL_DECODING:
            return await super()._one(op, i, req, emit)
        start = len(req.get("resume_ids") or [])
        out = Decoded(
            i,
            {
                "split": req.get("split"),
                "max_items": req.get("max_items"),
                "stream_text": bool(req.get("stream_text")),
                "progress": bool(req.get("progress")),
            },
            emit,
        )

        async def token(k: int) -> bool:
            return await out.feed(piece(k), [k])  # True once every item asked for is out

        aborted = await self._decode(req, token)
        result = {
            "text": "".join(out.text),
            "items": await out.items(),
            "num_output_tokens": out.tokens,
            "output_token_ids": out.token_ids,
            "num_prompt_tokens": start,
            "num_cached_tokens": 0,
        }
        return await self._end(i, req, result, aborted, emit)
