"""A query's answer on the wire: server-sent events as the query runs (`sse_events`), and plain
JSON answers that stop when the client goes away (`unless_disconnected`).

SSE events, each ``event: <kind>`` with one JSON ``data`` line:
  ``started``  {"query_id"} as soon as the query runs;
  ``progress`` {"status": "started" | "finished", "primitive", "op", "engine", "instance",
               "batch_size", "t"} when an engine primitive is batched and when it finishes;
  ``token``    {"primitive", "text"} each piece of the answer's text as the LLM decodes it;
  ``answer``   {"text", "output"} the final output (authoritative: token events may be absent
               when the answer comes from a fallback branch or a non-LLM step);
  ``trace``    {"trace", "query_id", "latency"};  ``done`` {"query_id"};
  ``error``    {"status", "error", "detail"} instead of answer/trace/done when the query fails.
While no event is due, a ``: keep-alive`` comment goes out every `ServerSettings.sse_keepalive`
seconds (15 by default; 0: none), so proxies that cut idle connections keep a long query's stream
open; SSE clients skip comments (teola.client.events.EventReader does).
A client that disconnects, from a stream or from a plain request, cancels its query: queued
primitives leave the engine queues and running LLM requests are aborted in vLLM."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any

from fastapi import Request

from teola.server.errors import ApiError
from teola.server.queries import plain, run_query
from teola.server.tracing import in_context

KEEPALIVE = b": keep-alive\n\n"

if TYPE_CHECKING:
    from teola.compile.compiler import Compiled
    from teola.server.quotas import Slot
    from teola.server.state import ServerState


async def sse_events(
    state: ServerState,
    name: str,
    app: Any,
    compiled: Compiled,
    config: dict[str, Any],
    limit: float,
    slot: Slot | None = None,
    parent: Any = None,
) -> AsyncIterator[bytes]:
    """The events of one query, sent as they happen. Closing the stream cancels the query. `slot`:
    the tenant's admission (teola.server.quotas), charged by the query; `parent`: the
    caller's trace context (teola.server.tracing), which the query's spans join."""
    events: asyncio.Queue = asyncio.Queue()
    task = in_context(parent, run_query(state, name, app, compiled, config, limit, events.put_nowait, slot))
    task.add_done_callback(lambda _: events.put_nowait(None))
    try:
        yield _event("started", {"query_id": compiled.query_id})
        every = state.settings.sse_keepalive or None
        while True:
            try:
                event = await asyncio.wait_for(events.get(), every)
            except TimeoutError:
                yield KEEPALIVE
                continue
            if event is None:
                break
            kind = event.pop("event", "progress")
            yield _event("token" if kind == "token" else "progress", event)
        try:
            result = task.result()
        except ApiError as exc:
            yield _event("error", {"status": exc.status, "error": exc.code, "detail": exc.detail})
            return
        output = result.output
        yield _event("answer", {"text": output if isinstance(output, str) else None, "output": output})
        yield _event("trace", {"trace": result.trace, "query_id": result.query_id, "latency": result.latency})
        yield _event("done", {"query_id": result.query_id})
    finally:
        if not task.done():  # the client went away mid-stream
            _cancel(state, name, task)


async def unless_disconnected(state: ServerState, name: str, request: Request, work: Awaitable[Any]) -> Any:
    """Await `work` (a query) unless the client disconnects first; then the query is cancelled
    (counted in /metrics) and ApiError 499 ends the request."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the handler itself was cancelled
        watch.cancel()
        _cancel(state, name, task)
        raise
    watch.cancel()
    if task.done():
        return task.result()
    if watch.exception() is not None:
        return await task  # the connection cannot be watched: just answer
    _cancel(state, name, task)
    raise ApiError(499, "client_closed_request", "the client disconnected; the query was cancelled")


async def _disconnected(request: Request) -> None:
    """Return when the client closes the connection (the body has been read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _cancel(state: ServerState, name: str, task: asyncio.Future) -> None:
    task.cancel()  # the runtime drops the query's queued work and aborts its running LLM requests
    state.metrics.cancelled.labels(name, "disconnect").inc()


def _event(kind: str, data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(plain(data))}\n\n".encode()
