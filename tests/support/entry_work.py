"""`RecordedWork`: the `Work` of one entry a test submits straight to an engine scheduler
(teola.runtime.engine_tier.work.Work): it keeps the entry's results (a streamed entry's final result
is its only one), when they came, its starts, its requeues and its streamed items."""

from __future__ import annotations

import asyncio
from typing import Any

from teola.scheduling.base import Pending


class RecordedWork:
    def __init__(self, n: int) -> None:
        self.out: list[Any] = [None] * n
        self.done_at: float | None = None
        self.starts: list[tuple[float, int]] = []
        self.requeues: list[float] = []
        self.items: list[tuple[float, Any]] = []
        self.done = asyncio.Event()

    def started(self, inst: Any, batch_id: str, batch_size: int, t: float) -> None:
        self.starts.append((t, batch_size))

    def results(self, start: int, results: list[Any], t: float) -> None:
        self.out[start : start + len(results)] = results
        self.done_at = t
        self.done.set()

    def item(self, text: str, t: float) -> None:
        self.items.append((t, text))

    def final(self, result: Any, t: float) -> None:
        self.results(0, [result], t)

    def delta(self, text: str, t: float) -> None:
        pass

    def requeued(self, t: float) -> None:
        self.requeues.append(t)

    def failed(self, exc: BaseException, inst: Any) -> None:
        raise AssertionError(f"entry failed on {getattr(inst, 'name', inst)}: {exc!r}")


def decoding_entry(
    program: str, requests: list[dict[str, Any]], t: float, op: str = "decoding"
) -> tuple[Pending, RecordedWork]:
    """One `op` entry of `program` holding `requests` (a batched call when several), queued at `t`."""
    work = RecordedWork(len(requests))
    return Pending(
        query_id=program, name=f"{program}.{op}", op=op, depth=0, arrival=t, requests=requests, work=work
    ), work
