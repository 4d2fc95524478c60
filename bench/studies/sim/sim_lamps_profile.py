"""The GPT-J 6B profile of LAMPS' set-up built from measured operators: `a100-40gb-gptj-6b-measured`.

    python -m bench sim_lamps_profile [DIR]   # DIR: the measured GPU tables (default $TEOLA_GPU_MEASURED)

No operator table of GPT-J exists; Llama-2-7B's (Vidur, A100) is the nearest shape, so the profile is
`teola profile --from-measured DIR --gpu a100 --model Llama-2-7b-hf --layers 28 --base a100-40gb-gptj-6b`
with GPT-J's differences applied, each labelled in the profile (`cost_provenance.gptj_shape`):

- per layer (derived: same operator times as Llama-2-7B's layer): GPT-J's layer has 4 x 4096^2
  attention weights (as Llama's) and a 2-matrix 4096 x 16384 MLP (134.2M weights) where Llama has a
  3-matrix gated 4096 x 11008 MLP (135.3M): 201.3M against 202.4M weights per layer (-0.5%), the
  same hidden size 4096 and no grouped-query attention, so KV bytes per token (2 x 28 x 4096 x 2)
  and the prefill-attention FLOPs are GPT-J's exactly; GPT-J has 28 layers (measured table x 28);
- LM head (derived): GPT-J's vocabulary of 50,400 (its config), not the table's 32,768, read at the
  achieved bandwidth the builder derives;
- KV pool and vLLM settings (assumed, as the derived profile): LAMPS limits its A100 to 40 GB, so
  the pool is the derived `a100-40gb-gptj-6b`'s 3,528 blocks (40 GB - 12.1 GB weights - ~2 GB), not
  the builder's 80 GB x 0.9; max_model_len 2048, max_num_seqs 256 kept from it too.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from bench.lib.results import ROOT

NAME = "a100-40gb-gptj-6b-measured"
GPTJ = {"layers": 28, "vocab": 50400, "hidden": 4096, "params_b": 6.05, "weights_gb": 12.1, "memory_gb": 40.0}


def build(data_dir: str) -> dict[str, Any]:
    """The profile (engines/sim/profile.py's format): see the module docstring."""
    from engines.sim.profile import load_profile
    from teola.sim.gpu_profile import CPU_STEP_S, build_gpu_profile

    base = load_profile("a100-40gb-gptj-6b")
    prof = build_gpu_profile(
        data_dir, "a100", "Llama-2-7b-hf", 1, base=base, layers=GPTJ["layers"], name=NAME
    )
    entry = prof["engines"]["vllm"]
    gbps = entry["cost_provenance"]["achieved_gbps"]["value"]
    lm_head = 2 * GPTJ["vocab"] * GPTJ["hidden"] / (gbps * 1e9)
    entry["cost"]["base"] = round(CPU_STEP_S + lm_head, 7)
    entry["cost_provenance"]["base"]["parts"]["lm_head_s"] = {
        "value": round(lm_head, 7),
        "kind": "derived",
        "source": f"GPT-J's LM head {GPTJ['vocab']} x {GPTJ['hidden']} x 2 bytes at the achieved bandwidth",
    }
    entry["num_blocks"] = int(base["engines"]["vllm"]["num_blocks"])
    entry["parallel"].update(
        params_b=GPTJ["params_b"], weights_gb=GPTJ["weights_gb"], gpu_memory_gb=GPTJ["memory_gb"]
    )
    entry["cost_provenance"]["gptj_shape"] = {
        "kind": "derived",
        "source": "GPT-J 6B from Llama-2-7B's measured layer: 28 layers x the Llama-2-7B layer's operator "
        "medians (GPT-J layer 201.3M weights vs 202.4M, hidden 4096 both, no GQA: same KV bytes per token "
        "and attention FLOPs); LM head of GPT-J's 50,400 vocabulary; KV pool 3,528 blocks kept from the "
        "derived a100-40gb-gptj-6b (LAMPS' 40 GB limit; assumed 2 GB for activations). Built by "
        "bench/studies/sim/sim_lamps_profile.py",
    }
    prof["source"] = (
        "GPT-J 6B (LAMPS' set-up: ../shared/papers/lamps.md §6.1) from MEASURED Llama-2-7B operators, "
        "scaled to GPT-J's shape (DERIVED; bench/studies/sim/sim_lamps_profile.py says how). "
        f"{prof['source']}"
    )
    return prof


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir",
        nargs="?",
        default=None,
        help="folder of the measured GPU tables (compute__*.csv.gz; default $TEOLA_GPU_MEASURED)",
    )


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Writes engines/profiles/a100-40gb-gptj-6b-measured.json."""
    data_dir = args.dir or os.environ.get("TEOLA_GPU_MEASURED")
    if not data_dir:
        raise SystemExit(
            "sim_lamps_profile: give the folder of the measured GPU tables (or set $TEOLA_GPU_MEASURED)"
        )
    out = ROOT / "engines" / "profiles" / f"{NAME}.json"
    out.write_text(json.dumps(build(data_dir), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit("run: python -m bench sim_lamps_profile [DIR] (docs/simulator.md)")
