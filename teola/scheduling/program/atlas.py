"""ATLAS, Adaptive Thread-Level Attained Service (Autellix §4.2.1, eq. 2), for multi-threaded
programs (dynamic DAGs of LLM calls).

A call's priority estimates the service along the longest chain of calls leading to it:
p(c) = 0 for a root, else max over its parents k of p(k) + t_k. The process table keeps, per
program, the critical-path end p(k) + t_k of each completed call and the longest one observed:
  - a client program's call declares its parents (`Program.call(..., parent_ids=[...])`), and its
    priority is computed from the completed parents exactly;
  - a call whose parents are not declared (a primitive of a teola e-graph, where the runtime passes
    only the node's depth) inherits the program's longest observed critical path, the paper's
    per-program scalar, so all concurrent calls of a program share one priority and finish together.
The priority is discretized into the MLFQ queues of `program_queues.py` (demotion, anti-starvation, multi-step).
"""
from __future__ import annotations

from teola.scheduling.process_table import ProcessTable
from teola.scheduling.program.policy import ProgramPolicy


def atlas_priority(table: ProcessTable, pid: str, inherited: float) -> float:
    """The call's inherited critical path (computed by `ProcessTable.call_arrived`)."""
    return inherited


class ATLASPolicy(ProgramPolicy):
    """`{"policy": "atlas"}`; options as `ProgramPolicy` (num_queues, base_quantum, growth, beta,
    rerank_every, service, table)."""

    name = "atlas"
    priority = staticmethod(atlas_priority)
