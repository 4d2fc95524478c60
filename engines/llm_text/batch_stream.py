"""How an LLM adapter runs a batch, shared by in-process vLLM (engines.vllm.engine) and the remote
engine (engines.openai.llm): every request of the batch runs concurrently as its own engine request
(the engine batches them continuously), `execute` returns the results in order, `stream` yields
each request's events as they come, and `Decoded` accumulates one streamed decode (text, token ids,
deltas, progress, split items).

An adapter supplies `one(i, request, emit)`: run request `i` (already checked) and return its result,
calling `emit(i, kind, payload)` for "delta", "progress", "item" (payloads: engines.stream_events) and
finally "final" (its result)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from engines.llm_text.llm_requests import check_request
from engines.llm_text.split_parser import SplitParser, emit_items
from engines.protocol import StreamEvent
from engines.stream_events import Delta, Item, Progress

Emit = Callable[[int, StreamEvent, Any], Awaitable[None]]
RunOne = Callable[[int, dict[str, Any], Emit | None], Awaitable[dict[str, Any]]]


async def run_batch(
    name: str,
    kind: str,
    ops: frozenset[str],
    op: str,
    requests: Any,
    default_max_tokens: int,
    one: RunOne,
    emit: Emit | None,
) -> list[Any]:
    """Check `op` and the requests, run them all at once; one result per request, in order. Any
    failure fails the batch and cancels its other requests."""
    if op not in ops:
        raise ValueError(f"engine {name!r} ({kind}) does not run op {op!r}; it runs {', '.join(sorted(ops))}")
    if not isinstance(requests, list):
        raise ValueError(f"requests must be a list of dicts, got {type(requests).__name__}")
    checked = [check_request(op, r, default_max_tokens) for r in requests]
    tasks = [asyncio.ensure_future(one(i, req, emit)) for i, req in enumerate(checked)]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def stream_batch(
    run: Callable[[Emit], Awaitable[list[Any]]],
) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
    """Yield the (i, kind, value) events `run(emit)` emits while it runs; re-raise its failure.
    Closing the iterator early cancels the batch."""
    queue: asyncio.Queue = asyncio.Queue()

    async def emit(i: int, kind: StreamEvent, payload: Any) -> None:
        queue.put_nowait((i, kind, payload))

    batch = asyncio.ensure_future(run(emit))
    batch.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while (event := await queue.get()) is not None:
            yield event
        batch.result()  # re-raise a failure of the batch
    finally:
        if not batch.done():
            batch.cancel()
            await asyncio.gather(batch, return_exceptions=True)


async def final(emit: Emit | None, i: int, result: dict[str, Any]) -> dict[str, Any]:
    """Emit request `i`'s result as its "final" event (when streaming) and return it."""
    if emit is not None:
        await emit(i, StreamEvent.FINAL, result)
    return result


class Decoded:
    """What one streamed decode of request `i` has produced so far; `feed` each delta, then `items`."""

    def __init__(self, i: int, req: dict[str, Any], emit: Emit | None) -> None:
        self.i = i
        self.emit = emit
        self.parser = SplitParser(req["split"]) if req["split"] else None
        self.max_items = req["max_items"] if self.parser is not None else None
        self.deltas = emit is not None and req["stream_text"]
        self.progress = emit is not None and req["progress"]
        self.text: list[str] = []
        self.token_ids: list[int] = []
        self.tokens = 0  # output tokens (more than len(token_ids) when the engine sends no ids)
        self.stopped = False

    async def feed(
        self, text: str, token_ids: list[int], tokens: int | None = None, executor_s: float | None = None
    ) -> bool:
        """Take one delta (`tokens`: its token count when `token_ids` are unknown; `executor_s`: the
        request's seconds in the engine's running batch so far, where the engine tells); True once
        `max_items` items are out, so the decode may stop."""
        self.text.append(text)
        self.token_ids.extend(token_ids)
        self.tokens += len(token_ids) if tokens is None else tokens
        if self.deltas and text:
            await self.emit(self.i, StreamEvent.DELTA, Delta(text=text))
        if self.progress and (token_ids or tokens):
            await self.emit(self.i, StreamEvent.PROGRESS, Progress(tokens=self.tokens, executor_s=executor_s))
        if self.parser is not None and text:
            self.stopped = await emit_items(self.parser, text, self.max_items, self.i, self.emit)
        return self.stopped

    async def items(self) -> list[str]:
        """The items of the whole output; the trailing ones (not yet emitted) are emitted now."""
        if self.parser is None:
            return []
        items = self.parser.items[: self.max_items]
        if not self.stopped:
            limit = None if self.max_items is None else max(0, self.max_items - len(items))
            for item in self.parser.finish()[:limit]:
                items.append(item)
                if self.emit is not None:
                    await self.emit(self.i, StreamEvent.ITEM, Item(text=item))
        return items
