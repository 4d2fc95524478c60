"""The engines of one process that share the machine's CPU cores, lending them to each other by the
rule of engines/machine/core_lending.py while the runtime runs.

An engine joins a group with its home cores (`join`); the sentence-transformers models join one
group ("sentence_transformers", since they compute one batch at a time anyway), each vLLM instance
its own. Around its work an engine calls `enter(group)` (its cores for now) and `leave(group)`. A
group that can move its computation to other cores while it runs (a vLLM instance: an RPC into its
engine core, `apply`) is moved whenever the rule gives it other cores; an engine that enters waits
(at most SHRINK_WAIT) until every other group has given back the cores it borrowed, so two engines
never spin OpenMP threads on one core for longer than that. Groups without `apply` (the
sentence-transformers models) take their cores at their next batch.

Only engines in this process take part: under the Ray executor every engine is alone in its actor
and keeps its home cores.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from engines.machine.core_lending import lent_cores

log = logging.getLogger(__name__)
# how long an engine that starts work waits for the others to give back borrowed cores; a vLLM
# instance answers between two of its steps (a decode step of a small model takes ~30 ms on CPU,
# a long prefill step up to ~1 s: past this the engine starts anyway)
SHRINK_WAIT = 0.5

Apply = Callable[[list[int]], Awaitable[None]]


@dataclass(slots=True)
class _Group:
    home: list[int]
    members: int = 0
    busy: int = 0
    apply: Apply | None = None
    current: list[int] = field(default_factory=list)
    desired: list[int] = field(default_factory=list)
    mover: asyncio.Task | None = None


class CoreShare:
    """The groups of this process that share `all_cores` (see the module docstring)."""

    def __init__(self, all_cores: Sequence[int] | None = None) -> None:
        self.all_cores = sorted(all_cores if all_cores is not None else os.sched_getaffinity(0))
        self.groups: dict[str, _Group] = {}

    def join(
        self,
        group: str,
        home: Sequence[int],
        apply: Apply | None = None,
        current: Sequence[int] | None = None,
    ) -> None:
        """Add an engine to `group` (created with `home` cores; `apply` moves a running group, which
        computes on `current` cores now, its home if not given)."""
        g = self.groups.get(group)
        if g is None:
            now = sorted(current if current is not None else home)
            g = self.groups[group] = _Group(sorted(home), apply=apply, current=now, desired=now)
        g.members += 1
        self._replan()

    def leave_share(self, group: str) -> None:
        """Remove an engine from `group` (the group goes when its last engine does)."""
        g = self.groups.get(group)
        if g is None:
            return
        g.members -= 1
        if g.members <= 0:
            del self.groups[group]
            if g.mover is not None:
                g.mover.cancel()
        self._replan()

    def cores(self, group: str) -> list[int]:
        """The cores `group` computes on now, by the rule."""
        return lent_cores(group, self._busy(), self._homes(), self.all_cores)

    async def enter(self, group: str) -> list[int]:
        """`group` has work: returns its cores, once the other groups gave back what they borrowed."""
        self.groups[group].busy += 1
        moves = self._replan()
        shrinking = [t for name, t in moves if name != group]
        if shrinking:
            done, _ = await asyncio.wait([asyncio.shield(t) for t in shrinking], timeout=SHRINK_WAIT)
            if len(done) < len(shrinking):
                log.debug("core share: %s started before every other engine gave back its cores", group)
        return self.cores(group)

    @asynccontextmanager
    async def working(self, group: str) -> AsyncIterator[list[int]]:
        """`enter` while the body runs and `leave` after it; the body gets the cores `enter` returned."""
        cores = await self.enter(group)
        try:
            yield cores
        finally:
            self.leave(group)

    def leave(self, group: str) -> None:
        """`group` has no work left: the others may borrow its cores."""
        g = self.groups.get(group)
        if g is not None and g.busy > 0:
            g.busy -= 1
        self._replan()

    def _busy(self) -> set[str]:
        return {name for name, g in self.groups.items() if g.busy > 0}

    def _homes(self) -> dict[str, list[int]]:
        return {name: g.home for name, g in self.groups.items()}

    def _replan(self) -> list[tuple[str, asyncio.Task]]:
        """Set every group's desired cores; start moving the movable ones. Returns (group, mover)
        of the groups that must give cores back."""
        busy, homes, moves = self._busy(), self._homes(), []
        for name, g in self.groups.items():
            g.desired = lent_cores(name, busy, homes, self.all_cores)
            if g.apply is None:
                g.current = g.desired
                continue
            if g.desired != g.current and (g.mover is None or g.mover.done()):
                try:
                    g.mover = asyncio.get_running_loop().create_task(self._move(name, g))
                except (
                    RuntimeError
                ):  # no event loop (an engine joined from a thread): moved at the next change
                    continue
            if g.mover is not None and not g.mover.done() and not set(g.desired) >= set(g.current):
                moves.append((name, g.mover))
        return moves

    async def _move(self, name: str, g: _Group) -> None:
        while g.desired != g.current:
            target = list(g.desired)
            try:
                await g.apply(target)
            except Exception as exc:  # an engine going down: it keeps what it had
                log.warning("core share: could not move %s to cores %s: %s", name, target, exc)
                return
            g.current = target


_SHARE: CoreShare | None = None


def process_share() -> CoreShare:
    """The core share of this process (made on first use, over the cores this process may use)."""
    global _SHARE
    if _SHARE is None:
        _SHARE = CoreShare()
    return _SHARE
