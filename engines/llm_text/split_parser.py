"""Incremental parser that cuts a streamed LLM output into items (decode pipelining).

`split="list"`: numbered or bulleted lines ("1. foo", "2) bar", "- baz", "* qux"); other lines (a preamble
such as "Here are three queries:") are not items. If the whole output had no marked line, `finish()`
returns its non-empty lines as items, so an unnumbered answer still splits.
`split="jsonl"`: one JSON value per line; an item is the line's JSON text (valid JSON). Lines that are not
JSON (code fences, chatter) are kept in `rejected`.

A line is complete once its newline has arrived, so every item but the last is emitted while the
model is still generating; `finish()` returns the trailing item(s).
"""

from __future__ import annotations

import json
import re

from engines.protocol import StreamEvent
from engines.stream_events import Item

SPLITS = ("list", "jsonl")
_MARKED = re.compile(r"^\s*(?:\(?\d{1,3}[.):]|[-*\u2022+])\s+(?P<item>.*\S)\s*$")


class SplitParser:
    """feed(delta) -> complete items so far; finish() -> the remaining items at end of output."""

    def __init__(self, split: str):
        if split not in SPLITS:
            raise ValueError(
                f"split must be one of {', '.join(SPLITS)} (or None for no splitting), got {split!r}"
            )
        self.split = split
        self.items: list[str] = []
        self.rejected: list[str] = []
        self._buffer = ""
        self._unmarked: list[str] = []
        self._finished = False

    def feed(self, delta: str) -> list[str]:
        """Add streamed text; return the items completed by it (in order)."""
        if self._finished:
            raise RuntimeError("SplitParser.feed called after finish()")
        self._buffer += delta
        *lines, self._buffer = re.split(r"\r?\n", self._buffer)
        out = [item for line in lines if (item := self._line(line)) is not None]
        self.items.extend(out)
        return out

    def finish(self) -> list[str]:
        """End of output: return the trailing item (if any) plus the unmarked fallback for lists."""
        if self._finished:
            return []
        self._finished = True
        line, self._buffer = self._buffer, ""
        out = [item] if (item := self._line(line)) is not None else []
        if self.split == "list" and not self.items and not out:
            out = self._unmarked
        self.items.extend(out)
        return out

    def _line(self, line: str) -> str | None:
        text = line.strip()
        if not text:
            return None
        if self.split == "list":
            match = _MARKED.match(text)
            if match is None:
                self._unmarked.append(text)
                return None
            return match.group("item")
        try:
            json.loads(text)
        except ValueError:
            self.rejected.append(text)
            return None
        return text


def split_text(text: str, split: str) -> list[str]:
    """All items of a complete output (the non-streaming path)."""
    parser = SplitParser(split)
    return parser.feed(text) + parser.finish()


async def emit_items(parser: SplitParser, text: str, max_items: int | None, i: int, emit) -> bool:
    """Feed decoded text to the item parser and emit ("item") the new complete items of request
    `i`; True once `max_items` items are out."""
    new = parser.feed(text)
    if max_items is not None:  # items before this delta + new ones, capped at max_items
        new = new[: max(0, max_items - (len(parser.items) - len(new)))]
    if emit is not None:
        for item in new:
            await emit(i, StreamEvent.ITEM, Item(text=item))
    return max_items is not None and len(parser.items) >= max_items
