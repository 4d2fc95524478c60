"""PLAS, Program-Level Attained Service (Autellix §4.2.1, eq. 1), for single-threaded programs.

A new LLM call's priority is the summed service of its program's completed calls (from the process
table; larger = later), discretized into the MLFQ queues of `mlfq.py`, which also supply quantum
demotion, anti-starvation and multi-step ranking. Programs that have received little service so far
(short programs, new programs) go first, so long programs' later calls stop blocking short ones.
"""
from __future__ import annotations

from teola.runtime.policies.mlfq import ProgramPolicy


class PLASPolicy(ProgramPolicy):
    """`{"policy": "plas"}`; options as `ProgramPolicy` (num_queues, base_quantum, growth, beta,
    rerank_every, service, table)."""

    name = "plas"
    mode = "plas"


def _register() -> None:
    from teola.runtime.policies import register_policy
    register_policy("plas", PLASPolicy)


_register()
