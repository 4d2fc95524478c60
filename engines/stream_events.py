"""The payload of each kind of event an engine's `stream` yields, as (request index, kind, payload).

The kinds are `engines.protocol.StreamEvent`; each one's payload is one type here, built with keywords
and read by field:

    StreamEvent.ITEM      Item(text=...)        a complete item of a splittable output
    StreamEvent.DELTA     Delta(text=...)       decoded text, for requests with "stream_text"
    StreamEvent.PROGRESS  Progress(tokens=...)  tokens decoded so far (and seconds in the running batch,
                                                where known), for requests with "progress"
    StreamEvent.KV        KVReport(...)         the engine's own KV numbers, for requests with "progress"
    StreamEvent.FINAL     the request's result, the value `execute` returns for it (engines.protocol
                          lists its shape per op), not wrapped

They are frozen, plain data (they pickle, so a Ray actor's stream carries them unchanged)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Item:
    """A complete item of a splittable output, sent as soon as it is parsed."""

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Delta:
    """Text decoded since the request's previous delta."""

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """The output tokens the request has decoded so far (over this run; a resumed request counts
    from its resume), and, where the engine can tell, `executor_s`: the seconds this run has spent
    in the engine's running batch so far (its queue excluded), the service Autellix charges."""

    tokens: int
    executor_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class KVReport:
    """The engine's own numbers for one request, sent once it has been scheduled (its prompt is
    tokenized and in the KV cache) and again as it takes KV blocks.

    prompt_tokens: the request's prompt as the engine tokenized it, with the ids it resumes from;
    block_size: the tokens one KV block of the engine holds;
    used_blocks, total_blocks: the engine's KV blocks in use (a block shared through the prefix
    cache counts once) and in all, where the engine can say (None where it cannot)."""

    prompt_tokens: int
    block_size: int
    used_blocks: int | None = None
    total_blocks: int | None = None
