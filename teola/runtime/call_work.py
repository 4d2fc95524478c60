"""`CallWork`: the `Work` of one program call submitted with `Runtime.submit_call`; it resolves a
future with the engine's result and remembers which instance ran the call."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from teola.runtime.errors import CallFailed
from teola.runtime.executors.executor import Instance
from teola.scheduling.base import Pending
from teola.scheduling.dispatch_record import DispatchRecord, lift_hints

# The hints `Runtime.submit_call` takes as keyword arguments, kept in the call's dispatch record.
CALL_HINTS = ("abort_key", "predicted_tokens", "pause_kv", "resumes_preserved")


@dataclass(slots=True, kw_only=True)
class CallOutcome:
    """A finished program call: the engine's result dict, the instance that ran it ("llm/0") and
    when (loop time) the engine scheduler first sent it to an instance, so a caller can tell the
    time it queued from the time it ran."""

    result: dict[str, Any]
    instance: str | None
    started: float | None = None
    pause_kv: str | None = None  # the handling its pause got ("auto" resolved when it was queued)


class CallWork:
    """Resolves `future` with a `CallOutcome`, or with `CallFailed` naming the call and instance;
    `on_delta`, if given, receives the text as it decodes (requests with "stream_text")."""

    __slots__ = ("future", "call_id", "instance", "on_delta", "started_at")

    def __init__(
        self, *, future: asyncio.Future, call_id: str, on_delta: Callable[[str], None] | None = None
    ) -> None:
        self.future = future
        self.call_id = call_id
        self.instance: str | None = None
        self.on_delta = on_delta
        self.started_at: float | None = None

    def started(self, inst: Instance, batch_id: str, batch_size: int, t: float) -> None:
        self.instance = inst.name
        if self.started_at is None:  # a preempted call that resumes keeps its first start
            self.started_at = t

    def results(self, start: int, results: list[Any], t: float) -> None:
        if not self.future.done():
            r = results[0]
            self.future.set_result(
                CallOutcome(
                    result=r if isinstance(r, dict) else {"text": str(r)},
                    instance=self.instance,
                    started=self.started_at,
                )
            )

    def item(self, text: str, t: float) -> None:
        pass

    def final(self, result: Any, t: float) -> None:
        self.results(0, [result], t)

    def delta(self, text: str, t: float) -> None:
        if self.on_delta is not None:
            self.on_delta(text)

    def requeued(self, t: float) -> None:
        pass

    def failed(self, exc: BaseException, inst: Instance) -> None:
        if not self.future.done():
            err = CallFailed(
                f"call {self.call_id!r} failed on instance {inst.name}: {type(exc).__name__}: {exc}"
            )
            err.__cause__ = exc
            self.future.set_exception(err)


def call_entry(
    request: dict[str, Any],
    *,
    program: str,
    call_id: str,
    parents: Any,
    tenant: str,
    work: CallWork,
    now: float,
    hints: dict[str, Any],
) -> Pending:
    """The queue entry of one program call: its body, and a record holding the submitter's hints
    (keyword arguments, or hint fields a request dict was built with: those leave the body)."""
    unknown = sorted(set(hints) - set(CALL_HINTS))
    if unknown:
        raise TypeError(
            f"Runtime.submit_call: unknown argument(s) {unknown}; hints are {', '.join(CALL_HINTS)}"
        )
    body, lifted = lift_hints(request)
    given = {k: v for k, v in hints.items() if v is not None}
    return Pending(
        query_id=program,
        name=call_id,
        op="decoding",
        depth=0,
        arrival=now,
        requests=[body],
        query_arrival=now,
        work=work,
        parents=None if parents is None else tuple(parents),
        tenant=tenant,
        records=[DispatchRecord(**{**lifted, **given})],
    )
