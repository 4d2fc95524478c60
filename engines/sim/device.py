"""Simulated engines that share one machine: who waits for whom, and who slows whom down.

Simulated engines are independent by default, as engines on separate GPUs are. On a CPU machine
they are not, and a profile says how with a top-level "device" entry (`teola profile` measures it):

    "device": {"exclusive": ["sentence_transformers", "reranker"],
               "slowdown": {"vllm": {"sentence_transformers": 1.3, "reranker": 1.3},
                            "sentence_transformers": {"vllm": 1.1}},
               "source": "..."}

- exclusive: engine kinds that compute one batch at a time between them, as teola's real
  sentence-transformers engines do with `exclusive=True` (engines/sentence_transformers/adapter.py): a batch
  of one waits while a batch of another runs;
- slowdown: an op of the first kind takes this many times its modelled seconds when it starts while
  an engine of the second kind is computing (the largest factor among the busy kinds applies).

The state is per event loop, so the engines of one simulation share it and separate simulations
(each on its own virtual loop) never see each other.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class _LoopState:
    busy: Counter = field(default_factory=Counter)
    exclusive: asyncio.Lock = field(default_factory=asyncio.Lock)


_STATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = weakref.WeakKeyDictionary()


def _state() -> _LoopState:
    loop = asyncio.get_running_loop()
    state = _STATES.get(loop)
    if state is None:
        state = _STATES[loop] = _LoopState()
    return state


@dataclass(frozen=True, slots=True)
class DeviceShare:
    """One simulated engine's place on the shared machine: its kind, whether it is exclusive, and
    the slowdown its ops suffer per other busy kind."""

    kind: str
    exclusive: bool = False
    slowdown: tuple[tuple[str, float], ...] = ()

    @classmethod
    def from_profile(cls, kind: str, device: Any) -> DeviceShare | None:
        """The share of an engine of `kind` under a profile's "device" entry (None: no entry, or the
        entry does not name this kind). ValueError naming a malformed entry."""
        if device is None:
            return None
        if not isinstance(device, dict):
            raise ValueError(f"profile 'device' must be a dict of exclusive / slowdown, got {device!r:.80}")
        exclusive = device.get("exclusive") or []
        slowdown = device.get("slowdown") or {}
        if not isinstance(exclusive, list) or not all(isinstance(k, str) for k in exclusive):
            raise ValueError(
                f"profile 'device.exclusive' must be a list of engine kinds, got {exclusive!r:.80}"
            )
        if not isinstance(slowdown, dict) or not all(isinstance(v, dict) for v in slowdown.values()):
            raise ValueError(
                f"profile 'device.slowdown' must be {{kind: {{other kind: factor}}}}, got {slowdown!r:.80}"
            )
        mine = slowdown.get(kind) or {}
        for other, f in mine.items():
            if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f < 1.0:
                raise ValueError(f"profile 'device.slowdown.{kind}.{other}' must be a factor >= 1, got {f!r}")
        pairs = tuple(sorted((o, float(f)) for o, f in mine.items() if o != kind and f > 1.0))
        slows = any(kind in v for k, v in slowdown.items() if k != kind)  # others must see it busy
        if kind not in exclusive and not pairs and not slows:
            return None
        return cls(kind, kind in exclusive, pairs)

    def factor(self) -> float:
        """How much slower an op starting now runs, given the other kinds computing now."""
        busy = _state().busy
        return max((f for other, f in self.slowdown if busy[other] > 0), default=1.0)

    @asynccontextmanager
    async def computing(self) -> AsyncIterator[float]:
        """Hold the machine for one op: wait for the exclusive lock (exclusive kinds), count this
        kind as busy, and give the op's slowdown factor."""
        state = _state()
        if self.exclusive:
            await state.exclusive.acquire()
        state.busy[self.kind] += 1
        try:
            yield self.factor()
        finally:
            state.busy[self.kind] -= 1
            if self.exclusive:
                state.exclusive.release()


@asynccontextmanager
async def computing(share: DeviceShare | None) -> AsyncIterator[float]:
    """`share.computing()`, or a factor of 1 for an engine that shares nothing."""
    if share is None:
        yield 1.0
    else:
        async with share.computing() as f:
            yield f
