"""The events of a streamed query, as typed objects, and the reader that turns the server-sent
events of ``POST /v1/apps/{app}/query`` with ``"stream": true`` into them.

In order: one `Started`; `Progress` (an engine primitive batched, then finished) and `Token` (a piece
of the answer as the LLM decodes it) interleaved; then `Answer` (authoritative: tokens may be absent
when the answer comes from a non-LLM step), `Trace` and `Done`. A kind this client does not know
(a newer server) arrives as `UnknownEvent`. A failure mid-stream is the server's ``error`` event,
which the reader raises as the `teola.client.errors` exception of its status.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, ClassVar

from teola.client.errors import APIConnectionError, error_for
from teola.client.results import QueryResult


class EventKind(str, Enum):
    """The ``event:`` names the server sends."""

    STARTED = "started"
    PROGRESS = "progress"
    TOKEN = "token"
    ANSWER = "answer"
    TRACE = "trace"
    DONE = "done"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Started:
    """The query runs; its id."""

    kind: ClassVar[EventKind] = EventKind.STARTED
    query_id: str


@dataclass(frozen=True, slots=True)
class Progress:
    """An engine primitive was batched (`status` ``started``) or finished (``finished``): its name,
    op, engine and instance, the size of its batch, and `t`, seconds since the query started."""

    kind: ClassVar[EventKind] = EventKind.PROGRESS
    status: str
    primitive: str
    op: str | None = None
    engine: str | None = None
    instance: Any = None
    batch_size: int | None = None
    t: float | None = None


@dataclass(frozen=True, slots=True)
class Token:
    """A piece of the answer's `text` as the LLM primitive `primitive` decodes it."""

    kind: ClassVar[EventKind] = EventKind.TOKEN
    primitive: str
    text: str


@dataclass(frozen=True, slots=True)
class Answer:
    """The final output (authoritative); `text` is it when it is a string, else None."""

    kind: ClassVar[EventKind] = EventKind.ANSWER
    text: str | None
    output: Any


@dataclass(frozen=True, slots=True)
class Trace:
    """One trace entry per primitive, the query's id and its latency in seconds."""

    kind: ClassVar[EventKind] = EventKind.TRACE
    trace: list[dict[str, Any]]
    query_id: str
    latency: float


@dataclass(frozen=True, slots=True)
class Done:
    """The last event of a query that succeeded."""

    kind: ClassVar[EventKind] = EventKind.DONE
    query_id: str


@dataclass(frozen=True, slots=True)
class UnknownEvent:
    """An event of a kind this client does not know: its ``event:`` name and its JSON data."""

    name: str
    data: Any


Event = Started | Progress | Token | Answer | Trace | Done | UnknownEvent
_TYPES: dict[str, type] = {t.kind.value: t for t in (Started, Progress, Token, Answer, Trace, Done)}


def parse_event(name: str, data: Any) -> Event:
    """The typed event of one ``event: name`` with JSON `data`; an error event raises its exception.
    Fields a newer server adds are ignored; a malformed known event falls back to `UnknownEvent`."""
    if name == EventKind.ERROR.value and isinstance(data, dict):
        status = data.get("status")
        raise error_for(
            status if isinstance(status, int) else 500,
            str(data.get("error", "error")),
            str(data.get("detail", "")),
        )
    cls = _TYPES.get(name)
    if cls is None or not isinstance(data, dict):
        return UnknownEvent(name=name, data=data)
    try:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})
    except TypeError:  # a required field is missing
        return UnknownEvent(name=name, data=data)


class EventReader:
    """Reads a text/event-stream line by line (`feed`): the typed events, the answer's `text` so
    far, and the query's `result` once its answer and trace have come (`finish` checks the stream
    did not end before its last event)."""

    def __init__(self) -> None:
        self.text = ""
        self.result: QueryResult | None = None
        self.done = False
        self._name = ""
        self._data: list[str] = []
        self._answer: Answer | None = None

    def feed(self, line: str) -> Event | None:
        """One line of the stream (without its line break); the event it completes, if any."""
        if line == "":
            return self._dispatch()
        if line.startswith(":"):  # a comment (keep-alive)
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._name = value
        elif field == "data":
            self._data.append(value)
        return None

    def finish(self) -> None:
        """The stream ended: dispatch what is pending; APIConnectionError when it ended before its
        done event (the server went away)."""
        self._dispatch()
        if not self.done:
            raise APIConnectionError(
                "the event stream ended before its done event (the server closed the connection)"
            )

    def _dispatch(self) -> Event | None:
        if not self._data:
            self._name = ""
            return None
        name, raw = self._name or "message", "\n".join(self._data)
        self._name, self._data = "", []
        try:
            data = json.loads(raw)
        except ValueError:
            data = raw
        event = parse_event(name, data)
        self._record(event)
        return event

    def _record(self, event: Event) -> None:
        if isinstance(event, Token):
            self.text += event.text
        elif isinstance(event, Answer):
            self._answer = event
        elif isinstance(event, Trace) and self._answer is not None:
            self.result = QueryResult(
                output=self._answer.output, trace=event.trace, query_id=event.query_id, latency=event.latency
            )
        elif isinstance(event, Done):
            self.done = True
