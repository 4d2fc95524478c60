"""`RunningCall`: one run of a preemptible LLM call on an engine instance, as the Preemptor
(teola/runtime/engine_tier/preemption.py) tracks it: what it sent, what it decoded and what it is
charged of the instance's KV cache (teola.scheduling.kv_ledger)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from teola.runtime.engine_tier.call_items import CallItems
from teola.runtime.executors.executor import Instance
from teola.scheduling.base import Pick, RequestQueue


@dataclass(slots=True, eq=False, kw_only=True)
class RunningCall:
    """One run of a call: `sent` are the indices of its entry's requests this run sends (`requests`)."""

    inst: Instance
    pick: Pick
    queue: RequestQueue
    tag: str
    sent: list[int]
    requests: list[dict[str, Any]]
    tokens: int
    started: float
    stopping: bool = False
    events: int = 0
    decoded: dict[int, int] = field(default_factory=dict)  # per position in `requests`: tokens so far
    executed: dict[int, float] = field(default_factory=dict)  # per position: seconds in the running batch
    held: dict[int, int] = field(default_factory=dict)  # per position: its KV charge (live admission)
    prompt: dict[int, int] = field(
        default_factory=dict
    )  # per position: its prompt tokens, as the engine reported
    items: CallItems | None = None  # a partial decode's items, over all its runs
