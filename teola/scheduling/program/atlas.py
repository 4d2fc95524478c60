"""ATLAS, Adaptive Thread-Level Attained Service (Autellix §4.2.1, eq. 2 and Algorithm 1), for
multi-threaded programs (dynamic DAGs of LLM calls).

The process table keeps, per program, the longest observed critical path: max over its completed
calls of (the call's inherited priority + its service) (Algorithm 1 line 4). A new call's priority:
  - `critical_path="program"` (default, Algorithm 1 line 11): that per-program scalar, inherited by
    every active call of the program whatever parents it declares, so all concurrent calls of a
    program share one priority;
  - `critical_path="parents"` (a named option, eq. 2 read per call): 0 for a declared root, else max
    over its completed declared parents k of p(k) + t_k; a call that declares no parents (a
    primitive of a teola e-graph) still inherits the program's scalar.
The priority is discretized into the MLFQ queues of `queues.py` (demotion, anti-starvation, multi-step).
"""

from __future__ import annotations

from typing import Any

from teola.scheduling.base import Pending
from teola.scheduling.process_table import ProcessTable
from teola.scheduling.program.policy import ProgramPolicy

CRITICAL_PATHS = ("program", "parents")


def atlas_priority(table: ProcessTable, pid: str, inherited: float) -> float:
    """The call's inherited critical path (computed by `ProcessTable.call_arrived`)."""
    return inherited


class ATLASPolicy(ProgramPolicy):
    """`{"policy": "atlas"}`; options as `ProgramPolicy` (num_queues, base_quantum, growth, beta,
    rerank_every, service, table, preempt, promotion, quanta), plus critical_path ("program" or
    "parents", see the module docstring)."""

    name = "atlas"
    priority = staticmethod(atlas_priority)

    def __init__(self, *args: Any, critical_path: str = "program", **kwargs: Any) -> None:
        if critical_path not in CRITICAL_PATHS:
            raise ValueError(f"atlas: critical_path must be one of {CRITICAL_PATHS}, got {critical_path!r}")
        self.critical_path = critical_path
        super().__init__(*args, **kwargs)

    def parents(self, entry: Pending) -> tuple[str, ...] | None:
        """None (the program's scalar) unless critical_path="parents"."""
        return entry.parents if self.critical_path == "parents" else None
