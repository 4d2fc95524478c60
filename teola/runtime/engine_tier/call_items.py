"""`CallItems`: the items of a preemptible partial decode (decode pipelining's `partial_decoding`:
one streaming request whose output is cut into items as it decodes) across the runs of its call
(teola.runtime.engine_tier.preemption). Each item goes downstream once, whole and in order, however
often the call is preempted.

Until its first preemption the call's items are the engine's, sent on as they come, except those
that come while the call is being stopped: at an abort the engine also cuts the line left
unfinished into an item, so they are held until the run decodes on (they were whole) or ends
without being preempted. A resumed run's engine sees only that run's text, so from the first
preemption on the call's own parser cuts the items from its whole output (earlier runs' text, then
the resumed run's text, which the engine is asked to stream) and sends those not sent yet: the
line the abort cut short comes out once it is complete."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engines.llm_text.split_parser import SplitParser
from teola.runtime.engine_tier.work import Work


class CallItems:
    """See the module docstring. `request`: the partial decode's request as first sent."""

    __slots__ = ("work", "split", "max_items", "text_wanted", "sent", "held", "parser", "fed")

    def __init__(self, work: Work, request: Mapping[str, Any]) -> None:
        self.work = work
        self.split: str = request["split"]
        self.max_items: int | None = request.get("max_items")
        self.text_wanted = bool(request.get("stream_text"))  # its caller asked for the text itself
        self.sent = 0
        self.held: list[str] = []
        self.parser: SplitParser | None = None  # from the first preemption on
        self.fed = 0  # characters of the whole output the parser has taken

    def engine_item(self, item: str, stopping: bool, t: float) -> None:
        """An item the engine cut from the run's output (ignored once the call's parser cuts them)."""
        if self.parser is not None:
            return
        if stopping:
            self.held.append(item)
            return
        self.release(t)
        self.sent += 1
        self.work.item(item, t)

    def release(self, t: float) -> None:
        """The run decoded on: the items held meanwhile were whole; they go downstream."""
        held, self.held = self.held, []
        for item in held:
            self.sent += 1
            self.work.item(item, t)

    def delta(self, text: str, t: float) -> None:
        """Text the run decoded: to the work if its caller asked for it; cut into items once the
        call was preempted."""
        if self.parser is None or self.text_wanted:
            self.work.delta(text, t)
        if self.parser is not None:
            self.parser.feed(text)
            self.fed += len(text)
            self._send(t)

    def all_out(self, output: str) -> bool:
        """Whether `output` (all the call decoded) holds every item it asked for."""
        return self.max_items is not None and len(SplitParser(self.split).feed(output)) >= self.max_items

    def preempted(self, output: str, t: float) -> int | None:
        """The run was preempted with `output` decoded over all runs: the held items are dropped
        (the last may be cut short) and the items of its complete lines not sent yet go now. The
        resumed request streams its text (its record's `stream_text`) and asks the engine for the
        items still missing, returned here (None: no fixed count; the engine may not count the cut
        line's end as one: then it decodes one item more)."""
        self.held = []
        if self.parser is None:
            self.parser = SplitParser(self.split)
        self._take(output)
        self._send(t)
        return None if self.max_items is None else self.max_items - len(self.parser.items)

    def ended(self, output: str, t: float) -> None:
        """The call ended with `output` its whole text: its last items go (before its final)."""
        if self.parser is None:
            self.release(t)
            return
        self._take(output)
        self.parser.finish()
        self._send(t)

    def _take(self, output: str) -> None:
        self.parser.feed(output[self.fed :])
        self.fed = len(output)

    def _send(self, t: float) -> None:
        items = self.parser.items if self.max_items is None else self.parser.items[: self.max_items]
        for item in items[self.sent :]:
            self.work.item(item, t)
        self.sent = max(self.sent, len(items))
