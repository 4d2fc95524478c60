"""Preemption and KV swap on vLLM: the swap kernel's time (swap), resuming a preempted call by KV
swap vs recompute (swap_resume) and how faithfully a preempted greedy call resumes (resume_fidelity).

Usage: python -m bench.kv_studies --study NAME [options]; `--study NAME --help` lists its options."""
from __future__ import annotations

import sys

from bench.common import run_study

STUDIES = {
    "swap": "kv_swap",                   # swap time of N scattered KV blocks: native kernel vs loops
    "swap_resume": "kv_swap_resume",     # resume time of a preempted call: KV swap vs recompute
    "resume_fidelity": "resume_fidelity",  # does a resumed greedy call give the same tokens?
}


def main(argv: list[str] | None = None) -> int:
    return run_study("kv_studies", STUDIES, argv, description=__doc__.split("\n\n")[0]) or 0


if __name__ == "__main__":
    sys.exit(main())
