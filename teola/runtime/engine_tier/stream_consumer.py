"""The one loop that consumes an engine's stream of `(index, kind, payload)` events: a batch whose
answers stream their text (batch_runner.text_stream), a Partial Decoding batch whose items go
downstream as they are parsed (batch_runner.item_stream), a preemptible call with its progress
(preemption.Preemptor). Each caller says what to do per event kind; the loop checks the indices and
that each payload is its kind's type (engines.stream_events), collects the final results and fails,
naming the engine, a stream that ends without every one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engines.protocol import StreamEvent
from engines.stream_events import Delta, Item, KVReport, Progress
from teola.runtime.engine_tier.engine_context import EngineContext
from teola.runtime.executors.executor import Instance

# (request index, payload, loop time) -> None; the payload is its kind's type in PAYLOADS
# (a final: the result)
Handler = Callable[[int, Any, float], None]
PAYLOADS: Mapping[StreamEvent, type] = {
    StreamEvent.ITEM: Item,
    StreamEvent.DELTA: Delta,
    StreamEvent.PROGRESS: Progress,
    StreamEvent.KV: KVReport,
}


@dataclass(slots=True)
class Streamed:
    """What a stream has delivered so far (kept by the caller, so it can still be read after the
    stream failed): each request's final result, the requests heard from, those with no final yet."""

    finals: list[Any]
    heard: set[int] = field(default_factory=set)
    open: set[int] = field(default_factory=set)

    @classmethod
    def of(cls, n: int) -> Streamed:
        return cls([None] * n, set(), set(range(n)))


async def consume(
    ctx: EngineContext,
    inst: Instance,
    op: str,
    requests: list[dict[str, Any]],
    handlers: Mapping[StreamEvent, Handler],
    *,
    seen: Streamed | None = None,
    strict: bool = False,
    what: str = "batch",
) -> list[Any]:
    """Run `requests` on `inst` as one stream; call `handlers[kind](index, payload, time)` for each
    event (a final result's handler after it is recorded); returns the finals in request order.
    With `strict`, an event kind with no handler (other than "final") is an error; otherwise it is
    ignored."""
    n = len(requests)
    got = seen if seen is not None else Streamed.of(n)
    async for idx, kind, payload in ctx.executor.stream(inst, op, requests):
        if not 0 <= idx < n:
            raise RuntimeError(f"engine {ctx.name!r} streamed request index {idx} of a {n}-request {what}")
        expected = PAYLOADS.get(kind)
        if expected is not None and not isinstance(payload, expected):
            raise RuntimeError(
                f"engine {ctx.name!r} streamed a {str(kind)!r} event carrying {type(payload).__name__}, "
                f"not engines.stream_events.{expected.__name__}"
            )
        got.heard.add(idx)
        if kind == StreamEvent.FINAL:
            got.finals[idx] = payload
            got.open.discard(idx)
        handler = handlers.get(kind)
        if handler is not None:
            handler(idx, payload, ctx.loop.time())
        elif strict and kind != StreamEvent.FINAL:
            kinds = ", ".join(repr(str(k)) for k in (*handlers, StreamEvent.FINAL))
            raise RuntimeError(f"engine {ctx.name!r} streamed an event of kind {kind!r} (expected {kinds})")
    if got.open:
        raise RuntimeError(
            f"engine {ctx.name!r} ended a {what}'s stream without a final result for "
            f"{len(got.open)} of {n} request(s)"
        )
    return got.finals
