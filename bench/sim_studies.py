"""The simulator's studies: how faithful it is against the real engines (fidelity, trace_diff,
step_shape, cost_forms), its GPU profiles (gpu_profiles; gpu_validation, SIMULATED against published
figures), how fast it is (speed), and the SIMULATED studies at the papers' scale (paper, paper_plots,
programs, autellix, lamps).

Usage: python -m bench.sim_studies --study NAME [options]; `--study NAME --help` lists a study's
options."""
from __future__ import annotations

import sys

from bench.common import run_study

STUDIES = {
    "fidelity": "sim_fidelity",        # the RAG benchmark measured vs simulated (real engines)
    "trace_diff": "sim_trace_diff",    # where the simulator's time differs, primitive by primitive
    "step_shape": "step_shape",        # a vLLM decode step against batch size (real engine)
    "cost_forms": "cost_forms",        # decode-step cost forms against stored profiles (offline)
    "gpu_profiles": "gpu_profiles",    # derived vs measured-operator GPU profiles per iteration (offline)
    "gpu_validation": "gpu_profile_validation",  # SIMULATED: measured GPU profiles vs published end-to-end figures
    "speed": "sim_speed",              # how fast the simulator is
    "paper": "sim_paper",              # SIMULATED: Teola Fig. 8-10 on GPU profiles
    "paper_plots": "sim_paper_plots",  # PNG plots of a sim_paper result file
    "programs": "sim_programs",        # SIMULATED: program scheduling at Autellix's scale
    "autellix": "sim_autellix",        # SIMULATED: Autellix Fig. 12 at its set-up
    "lamps": "sim_lamps",              # SIMULATED: LAMPS vs INFERCEPT vs SJF
    "lamps_paper": "sim_lamps_paper",  # SIMULATED: LAMPS' Fig. 6 at its set-up vs INFERCEPT and vLLM
    "lamps_profile": "sim_lamps_profile",  # the GPT-J 6B profile of LAMPS' set-up from measured operators
}


def main(argv: list[str] | None = None) -> int:
    return run_study("sim_studies", STUDIES, argv, description=__doc__.split("\n\n")[0]) or 0


if __name__ == "__main__":
    sys.exit(main())
