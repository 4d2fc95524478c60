"""Offline planning (SamuLLM): the SIMULATED planner study at the paper's scale (sim), a small job planned
and executed on real engines (real) and the output lengths the planner's eCDFs come from (lengths).

Usage: python -m bench.plan_studies --study NAME [options]; `--study NAME --help` lists its options."""
from __future__ import annotations

import sys

from bench.common import run_study

STUDIES = {
    "sim": "plan_study",        # SIMULATED: the planner vs its heuristics at 8 GPUs
    "real": "plan_real",        # teola plan + teola run-job on real engines
    "lengths": "plan_lengths",  # record the offline apps' output lengths (the planner's eCDFs)
    "sharegpt_lengths": "plan_sharegpt_lengths",  # ShareGPT's reply lengths, for the sim study
}


def main(argv: list[str] | None = None) -> int:
    return run_study("plan_studies", STUDIES, argv, description=__doc__.split("\n\n")[0]) or 0


if __name__ == "__main__":
    sys.exit(main())
