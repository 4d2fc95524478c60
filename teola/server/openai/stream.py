"""How the OpenAI-compatible door (teola.server.openai.door) streams an answer: OpenAI's chunks as
the engine decodes, the first one only with the first token (the chat role in it, as vLLM and
OpenAI send it), text held back where a tool call may start or while a forced call's arguments
are decoded, what the call is charged however its stream ends, and a failed call as OpenAI
answers it. While nothing is sent (the call queued or prefilling, a forced call's arguments held
back), a ``: keep-alive`` comment line goes out every `ServerSettings.sse_keepalive` seconds, as on
the native query stream (teola.server.streaming); SSE clients, the openai SDK among them, skip it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import teola.server.openai.replies as replies
from engines.request_checks import ContextTooLong
from teola.runtime import CallFailed
from teola.server.errors import ApiError
from teola.server.openai.calls import DoorCall
from teola.server.openai.errors import door_error_event
from teola.server.openai.tools import ForcedCall, ToolStream
from teola.server.quotas import Slot, call_tokens, estimate_tokens

KEEPALIVE = ": keep-alive\n\n"


def call_error(exc: CallFailed) -> ApiError:
    """A failed call as OpenAI answers it: a prompt longer than the model's context window is the
    caller's 400 `context_length_exceeded`; anything else the engine's 502."""
    if isinstance(exc.__cause__, ContextTooLong):
        return ApiError(400, "context_length_exceeded", str(exc.__cause__), param="messages")
    return ApiError(502, "engine_failed", str(exc))


class Answer:
    """How a streamed answer is written: chat or completion chunks, and, when tools are offered,
    text held back from where a tool call may start (teola.server.openai.tools.ToolStream)."""

    def __init__(
        self,
        chat: bool,
        call_id: str,
        model: str,
        max_tokens: int,
        parallel: bool | None,
        forced: ForcedCall | None = None,
    ) -> None:
        self.chat, self.call_id, self.model, self.max_tokens = chat, call_id, model, max_tokens
        self.tools = ToolStream(parallel) if parallel is not None else None
        self.forced = forced
        self.held: list[str] = []  # a forced call's arguments, sent whole once complete
        self.started = False

    def chunk(self, text: str | None = None, **kw: Any) -> str:
        """A chunk of the answer; the first one carries the assistant's role (chat), as vLLM and
        OpenAI send it with the first token."""
        if self.chat and not self.started and kw.get("use") is None:
            kw["role"] = True
        self.started = self.started or kw.get("use") is None
        return replies.chunk(self.chat, self.call_id, self.model, text, **kw)

    def text(self, piece: str) -> str | None:
        """The chunk of a decoded piece, or None while it is held back."""
        if self.forced is not None:
            self.held.append(piece)
            return None
        sent = self.tools.feed(piece) if self.tools is not None else piece
        return self.chunk(sent) if sent else None

    def ending(self, result: dict[str, Any]) -> list[str]:
        """The chunks after the last piece: held text that was no tool call, the tool calls, the finish
        (with the logprobs of every output token, when asked for: the engine returns them at its end)."""
        out, calls = [], []
        if self.forced is not None:
            calls = self.forced.calls("".join(self.held))
            out.append(self.chunk(calls=calls) if calls else self.chunk("".join(self.held)))
        if self.tools is not None:
            rest, calls = self.tools.finish()
            if rest:
                out.append(self.chunk(rest))
            if calls:
                out.append(self.chunk(calls=calls))
        return out + [
            self.chunk(
                None,
                finish=replies.finish_reason(result, self.max_tokens, bool(calls)),
                logprobs=replies.choice_logprobs(self.chat, result.get("logprobs")),
            )
        ]


class Spend:
    """What a streamed call is charged: the engine's count when it answers; cut short (its client
    closed the stream, even right after the last token), its prompt estimate and the text it
    streamed; failed on the engine, the text it streamed."""

    def __init__(self, slot: Slot, prompt_tokens: int) -> None:
        self.slot, self.prompt_tokens = slot, prompt_tokens
        self.streamed: list[str] = []
        self.charged = False

    def settle(self, task: asyncio.Future) -> None:
        """Charge the call once its stream ends, by how `task` (the call) ended."""
        if task.done() and not task.cancelled() and task.exception() is None:
            self._charge(call_tokens(task.result().result))
        elif task.done() and isinstance(task.exception(), CallFailed):
            self._charge(estimate_tokens("".join(self.streamed)))
        else:
            self._charge(self.prompt_tokens + estimate_tokens("".join(self.streamed)))

    def _charge(self, tokens: int) -> None:
        if not self.charged:
            self.charged = True
            self.slot.charge(tokens)


async def stream_answer(
    submit: Callable[..., Any],
    done: Callable[[], None],
    spend: Spend,
    seen: DoorCall,
    answer: Answer,
    include_usage: bool,
) -> AsyncIterator[str]:
    """The call's text as OpenAI stream chunks; a client that goes away withdraws (or aborts) it."""
    queue: asyncio.Queue = asyncio.Queue()

    def on_delta(piece: str) -> None:
        spend.streamed.append(piece)
        queue.put_nowait(piece)

    task = asyncio.ensure_future(submit(on_delta))
    task.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        # no chunk before the first token (its arrival time is the caller's time to first token),
        # only keep-alive comments
        async for sent in _pieces(queue, answer, seen.state.settings.sse_keepalive):
            yield sent
        try:
            outcome = task.result()
        except CallFailed as exc:
            seen.failed(exc, "engine")
            err = call_error(exc)
            yield door_error_event(err.status, err.code, err.detail, err.param)
            return
        seen.finished(outcome)
        spend.settle(task)
        for sent in answer.ending(outcome.result):
            yield sent
        if include_usage:
            yield answer.chunk(use=replies.usage(outcome.result))
        yield "data: [DONE]\n\n"
    finally:
        spend.settle(task)  # before any await: a closed stream's generator may be cancelled again at one
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            seen.failed(asyncio.CancelledError("the client disconnected"), None)
            seen.state.metrics.cancelled.labels(seen.app_name, "disconnect").inc()
        done()


async def _pieces(queue: asyncio.Queue, answer: Answer, keepalive: float) -> AsyncIterator[str]:
    """The chunks of the pieces in `queue` until its None, with a keep-alive comment after every
    `keepalive` seconds (0: never) in which nothing was sent."""
    loop = asyncio.get_running_loop()
    last = loop.time()
    while True:
        wait = max(0.0, last + keepalive - loop.time()) if keepalive else None
        try:
            piece = await asyncio.wait_for(queue.get(), wait)
        except TimeoutError:
            last = loop.time()
            yield KEEPALIVE
            continue
        if piece is None:
            return
        if (sent := answer.text(piece)) is not None:
            last = loop.time()
            yield sent
