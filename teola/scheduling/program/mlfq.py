"""MLFQ, the program-blind baseline of Autellix (§4.2): every new call enters the top queue and
sinks as it uses its quanta (queues, demotion and anti-starvation in `program_queues.py`)."""

from __future__ import annotations

from teola.scheduling.process_table import ProcessTable
from teola.scheduling.program.policy import ProgramPolicy


def mlfq_priority(table: ProcessTable, pid: str, inherited: float) -> float:
    """Every call starts at priority 0 (the top queue), whatever its program did before."""
    return 0.0


class MLFQPolicy(ProgramPolicy):
    """`{"policy": "mlfq"}`; options as `ProgramPolicy` (num_queues, base_quantum, growth, beta,
    rerank_every, service, table)."""

    name = "mlfq"
    priority = staticmethod(mlfq_priority)
