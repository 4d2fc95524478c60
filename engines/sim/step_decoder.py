"""`StepDecoder`: a deterministic continuous-batching LLM for scheduling tests and simulations.

Every `step` seconds each running request decodes one token; a request decodes `max_tokens`
tokens (no EOS). Token k of a call's output is the id k and the text "t<k> ", so a call that is
preempted and resumed with `resume_ids` continues at the right position and its joined output
equals an uninterrupted run: exactly what a resumed greedy vLLM call should do. It streams
("progress", decoded so far) and ("delta", text) like the vLLM adapter, aborts by owner or tag
(returning what it decoded, marked "aborted"), and records how many requests ran at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from engines.protocol import EngineProfile, StreamEvent
from engines.requests import PrimOp
from engines.stream_events import Delta, Progress


class StepDecoder:
    """See the module docstring. `max_batch` / `max_efficient_batch` form its profile."""

    ops = frozenset({PrimOp.DECODING})

    def __init__(
        self, name: str, step: float = 0.01, max_batch: int = 64, max_efficient_batch: int = 8
    ) -> None:
        self.name = name
        self.step = step
        self.profile = EngineProfile(max_batch, max_efficient_batch)
        self.started = False
        self.running = 0
        self.peak = 0  # most requests decoding at once
        self.aborted: list[str] = []
        self.finished: list[str] = []  # tags/owners of calls in the order they finished (not aborted)
        self._stop: set[str] = set()
        self._live: dict[str, int] = {}  # owner/tag -> its requests decoding now

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.started = False

    async def health(self) -> bool:
        return self.started

    async def abort(self, keys: list[str]) -> int:
        """Stop the running requests of these owners / tags; returns how many keys were running."""
        live = [k for k in keys if self._live.get(k)]
        self.aborted.extend(live)
        self._stop.update(live)
        return len(live)

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        return list(await asyncio.gather(*(self._one(op, i, r, None) for i, r in enumerate(requests))))

    async def stream(
        self, op: str, requests: list[dict[str, Any]]
    ) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        queue: asyncio.Queue = asyncio.Queue()

        async def emit(i: int, kind: str, value: Any) -> None:
            queue.put_nowait((i, kind, value))

        batch = asyncio.ensure_future(
            asyncio.gather(*(self._one(op, i, r, emit) for i, r in enumerate(requests)))
        )
        batch.add_done_callback(lambda _: queue.put_nowait(None))
        while (event := await queue.get()) is not None:
            yield event
        batch.result()

    async def _one(
        self, op: str, i: int, req: dict[str, Any], emit: Callable[[int, str, Any], Awaitable[None]] | None
    ) -> dict[str, Any]:
        if op not in self.ops:
            raise ValueError(f"step decoder {self.name!r} runs only decoding, not {op!r}")
        start = len(req.get("resume_ids") or [])
        ids: list[int] = []

        async def token(k: int) -> bool:
            ids.append(k)
            if emit is not None:
                if req.get("stream_text"):
                    await emit(i, StreamEvent.DELTA, Delta(text=f"t{k} "))
                if req.get("progress"):
                    await emit(i, StreamEvent.PROGRESS, Progress(tokens=len(ids)))
            return False

        aborted = await self._decode(req, token)
        prompt = sum(len(str(t).split()) for _, t in req.get("parts", [])) + start
        result = {
            "text": "".join(f"t{k} " for k in ids),
            "items": [],
            "num_output_tokens": len(ids),
            "output_token_ids": ids,
            "num_prompt_tokens": prompt,
            "num_cached_tokens": 0,
        }
        return await self._end(i, req, result, aborted, emit)

    async def _decode(self, req: dict[str, Any], token: Callable[[int], Awaitable[bool]]) -> bool:
        """Decode `req` one token id per step from where `resume_ids` left it, calling `token(k)`
        for each (it returns True to stop early); True if the request was aborted."""
        keys = {k for k in (req.get("owner"), req.get("tag")) if k}
        start = len(req.get("resume_ids") or [])
        self.running += 1
        self.peak = max(self.peak, self.running)
        for k in keys:
            self._live[k] = self._live.get(k, 0) + 1
        try:
            for k in range(start, start + int(req["max_tokens"])):
                await asyncio.sleep(self.step)
                if keys & self._stop:
                    return True
                if await token(k):
                    break
            return False
        finally:
            self.running -= 1
            for k in keys:
                self._live[k] -= 1
                if not self._live[k]:
                    del self._live[k]
                    self._stop.discard(k)

    async def _end(
        self,
        i: int,
        req: dict[str, Any],
        result: dict[str, Any],
        aborted: bool,
        emit: Callable[[int, str, Any], Awaitable[None]] | None,
    ) -> dict[str, Any]:
        """Mark and record the request's end, stream its final result."""
        if aborted:
            result["aborted"] = True
        else:
            self.finished.append(req.get("tag") or req.get("owner") or "")
        if emit is not None:
            await emit(i, StreamEvent.FINAL, result)
        return result
