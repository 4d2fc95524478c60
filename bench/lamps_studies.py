"""LAMPS and calls that pause for tools, on the real engines: LAMPS vs FCFS + INFERCEPT vs SJF (real),
the shipped ReAct agent under them (agent), the output-length predictor (length_predictor) and the
length trace it learns from (record_lengths).

Usage: python -m bench.lamps_studies --study NAME [options]; `--study NAME --help` lists its options."""
from __future__ import annotations

import sys

from bench.common import run_study

STUDIES = {
    "real": "lamps_real",                      # LAMPS vs FCFS + INFERCEPT vs SJF on real engines
    "agent": "agent_real",                     # the ReAct agent app under the three policies
    "length_predictor": "length_predictor",    # how well the length predictor predicts
    "record_lengths": "record_lengths",        # record the real engine's output lengths (its trace)
}


def main(argv: list[str] | None = None) -> int:
    return run_study("lamps_studies", STUDIES, argv, description=__doc__.split("\n\n")[0]) or 0


if __name__ == "__main__":
    sys.exit(main())
