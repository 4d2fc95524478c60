"""PLAS, Program-Level Attained Service (Autellix §4.2.1, eq. 1), for single-threaded programs.

A new LLM call's priority is the summed service of its program's completed calls (from the process
table; larger = later), discretized into the MLFQ queues of `program_queues.py`, which also supply
quantum demotion, anti-starvation and multi-step ranking. Programs that have received little
service so far (short programs, new programs) go first, so long programs' later calls stop blocking
short ones.
"""

from __future__ import annotations

from teola.scheduling.process_table import ProcessTable
from teola.scheduling.program.policy import ProgramPolicy


def plas_priority(table: ProcessTable, pid: str, inherited: float) -> float:
    """The program's attained service over its completed calls (0 for a new program)."""
    entry = table.get(pid)
    return 0.0 if entry is None else entry.service


class PLASPolicy(ProgramPolicy):
    """`{"policy": "plas"}`; options as `ProgramPolicy` (num_queues, base_quantum, growth, beta,
    rerank_every, service, table)."""

    name = "plas"
    priority = staticmethod(plas_priority)
