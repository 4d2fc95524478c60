"""`EngineContext`: what the code that runs an engine's batches needs of its engine scheduler, as one
narrow object the scheduler builds (the batch runner and the preemptor take it instead of the
scheduler). It holds the scheduler's executor, metrics and loop, the record of running owners, and
callbacks; nothing here reaches back into the scheduler."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from teola.runtime.engine_tier.running_owners import RunningOwners
from teola.runtime.executors.executor import Executor, Instance
from teola.runtime.metrics import Metrics
from teola.scheduling.base import Pending, Pick, Policy, RequestQueue

Span = tuple[Pending, int, int]  # an entry and the [first, end) of its requests in one batch


@dataclass(slots=True, eq=False, kw_only=True)
class EngineContext:
    """name, executor, metrics, loop and running: the scheduler's own. The callbacks:
    spawn(coro): run a task the scheduler cancels on close;
    alive(inst, exc): after a failure, whether the instance is still healthy;
    observe(picks, started, finished, results): tell the policy what ran;
    landed(inst, requests, spans, tokens): a batch left the instance (frees its slot, schedules);
    kick(): schedule again soon; policy(): the policy in force;
    waiting(inst): the queue whose entries wait for `inst`; next_batch(): a new batch id."""

    name: str
    executor: Executor
    metrics: Metrics
    loop: asyncio.AbstractEventLoop
    running: RunningOwners
    spawn: Callable[[Coroutine[Any, Any, Any]], None]
    alive: Callable[[Instance, BaseException], Awaitable[bool]]
    observe: Callable[[list[Pick], float, float, list[Any] | None], None]
    landed: Callable[[Instance, list[dict[str, Any]], list[Span], int], None]
    kick: Callable[[], None]
    policy: Callable[[], Policy]
    waiting: Callable[[Instance], RequestQueue]
    next_batch: Callable[[], str]
