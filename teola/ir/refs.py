"""References from a primitive's arguments to values in the per-query object store."""

from __future__ import annotations

import re
from dataclasses import dataclass

_PART = re.compile(r"^(?P<base>.+)#(?P<a>\d+):(?P<b>\d+)$")


@dataclass(frozen=True, slots=True)
class Ref:
    """A prompt part taken from the object store: `key`, optionally one item of a list (`index`),
    items [index, stop) of it joined with `join` (`stop` set), or a whole list joined with `join`."""

    key: str
    index: int | None = None
    join: str | None = None
    stop: int | None = None

    def __str__(self) -> str:
        if self.index is not None and self.stop is not None:
            return f"${self.key}[{self.index}:{self.stop}]"
        if self.index is not None:
            return f"${self.key}[{self.index}]"
        return f"${self.key}"


def part_key(key: str, start: int, stop: int) -> str:
    """The key holding items [start, stop) of the list stored under `key`."""
    return f"{base_key(key)}#{start}:{stop}"


def base_key(key: str) -> str:
    m = _PART.match(key)
    return m.group("base") if m else key


def key_range(key: str) -> tuple[int, int] | None:
    """(start, stop) of a part key, None for a whole-list key."""
    m = _PART.match(key)
    return (int(m.group("a")), int(m.group("b"))) if m else None
