"""What a running sequence of SimLLM produces (a mixin, like engines/sim/admission.py: it uses the
engine's pool, queues and settings): each iteration's work grows its KV and seals full blocks; a
decode samples a token once its context is computed, streams it (delta, progress with the KV report,
split items) and ends at its target length or once every item asked for is out; a finished or
aborted sequence releases its blocks and sets its result.
"""

from __future__ import annotations

import asyncio
from typing import Any

from engines.protocol import StreamEvent
from engines.requests import DECODE_OPS, PREFILL_OPS
from engines.sim.admission import SimAdmission, SimSeq
from engines.sim.kv import BlockPool, block_hashes
from engines.sim.text import output_id, output_token
from engines.stream_events import Delta, Item, Progress


class SimDecoding(SimAdmission):
    """Token production and results of SimLLM's sequences (a mixin over its admission)."""

    pool: BlockPool
    running: list[SimSeq]
    waiting: list[SimSeq]
    n_items: int

    async def _advance(self, seq: SimSeq, n: int) -> None:
        """Apply one iteration's work to a sequence: its KV grows by n tokens; full blocks are
        cached; when its context is all computed it samples a token or (a prefill) finishes."""
        bs = self.pool.block_size
        seq.computed += n
        if seq.computed // bs > len(seq.held.hashes):  # a block filled up
            parent = seq.held.hashes[-1] if seq.held.hashes else 0
            for h in block_hashes(
                seq.ids, bs, start=len(seq.held.hashes), stop=seq.computed // bs, parent=parent
            ):
                self.pool.seal(seq.held, h)
        if seq.computed < len(seq.ids):
            return
        if seq.op in PREFILL_OPS:
            await self._finish(seq)
            return
        k = len(seq.req["resume_ids"]) + len(seq.out)
        token = output_token(
            k,
            seq.req["split"],
            seq.req["max_items"] or self.n_items,
            seq.target + len(seq.req["resume_ids"]),
            seq.topic,
        )
        token_id = output_id(k) if seq.written is None else seq.written[len(seq.out) % len(seq.written)]
        seq.out.append(token_id)
        seq.ids.append(token_id)
        seq.text.append(token)
        stopped = await self._emit_token(seq, token)
        if stopped or len(seq.out) >= seq.target:
            await self._finish(seq)

    async def _emit_token(self, seq: SimSeq, token: str) -> bool:
        """Stream one decoded token; True once a split output has all the items it asked for."""
        emit, req = seq.emit, seq.req
        if emit is not None and req["stream_text"]:
            await emit(seq.index, StreamEvent.DELTA, Delta(text=token))
        if emit is not None and req["progress"]:
            await self.report_kv(seq)
            await emit(
                seq.index, StreamEvent.PROGRESS, Progress(tokens=len(seq.out), executor_s=seq.executor_s)
            )
        if seq.parser is None:
            return False
        new = seq.parser.feed(token)
        cap = req["max_items"]
        if cap is not None:
            new = new[: max(0, cap - (len(seq.parser.items) - len(new)))]
        if emit is not None:
            for item in new:
                await emit(seq.index, StreamEvent.ITEM, Item(text=item))
        return cap is not None and len(seq.parser.items) >= cap

    async def _finish(self, seq: SimSeq, aborted: bool = False) -> None:
        if seq.state == "running":
            self.running.remove(seq)
        elif seq.state == "waiting":
            self.waiting.remove(seq)
        seq.state = "done"
        self._release(seq, aborted)
        counts = {
            "num_prompt_tokens": len(seq.ids) - len(seq.out),
            "num_cached_tokens": max(0, seq.cached),
            "queued_s": (seq.scheduled if seq.scheduled >= 0 else asyncio.get_running_loop().time())
            - seq.arrived,
            "executor_s": seq.executor_s,
        }
        if aborted:
            counts["aborted"] = True
        result: dict[str, Any] = counts
        if seq.op in DECODE_OPS:
            items = list(seq.parser.items) if seq.parser is not None else []
            cap = seq.req["max_items"]
            if seq.parser is not None and not (cap is not None and len(items) >= cap):
                for item in seq.parser.finish()[: None if cap is None else max(0, cap - len(items))]:
                    items.append(item)
                    if seq.emit is not None:
                        await seq.emit(seq.index, StreamEvent.ITEM, Item(text=item))
            result = {
                "text": "".join(seq.text),
                "items": items[:cap] if cap else items,
                **counts,
                "num_output_tokens": len(seq.out),
                "output_token_ids": list(seq.out),
            }
        if seq.emit is not None:
            await seq.emit(seq.index, StreamEvent.FINAL, result)
        if not seq.future.done():
            seq.future.set_result(result)
