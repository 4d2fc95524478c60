"""SIMULATED end-to-end figures of the measured-operator GPU profiles against published ones for the
same model and GPU: each published workload (requests all present at the start, with the input and
output lengths the source states) run by the simulator's iteration-level replica (teola/sim/replica.py) on the
matching profile of engines/profiles/, the error in percent, and where the simulated time goes.

    python -m bench gpu_profile_validation [--out bench/results/sim/gpu_profile_validation.md]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.lib.results import results_dir
from bench.studies.sim.gpu_figures import PARTS, PUBLISHED, Published
from bench.studies.sim.gpu_profile_validation_page import page
from engines.sim.cost import IterationCost
from engines.sim.profile import load_profile
from teola.sim.replica import SimRequest, simulate_replica

OUT = results_dir("sim") / "gpu_profile_validation.md"


def _profile(name: str) -> tuple[IterationCost, float, int]:
    """A profile's iteration cost, its assumed CPU step seconds and its largest measured token count."""
    entry = load_profile(name)["engines"]["vllm"]
    cpu = float(entry["cost_provenance"]["base"]["parts"]["cpu_step_s"]["value"])
    cost = IterationCost(**entry["cost"])
    return cost, cpu, max(n for n, _ in cost.token_table)


def breakdown(cost: IterationCost, cpu_step_s: float, requests: list[tuple[int, int]]) -> dict[str, float]:
    """Seconds per part of a batch of (prompt, output) requests all present at the start: one iteration
    prefilling every prompt (each request's first output token included), then decode iterations of the
    requests not yet done; the replica runs the same iterations."""
    parts = dict.fromkeys(PARTS, 0.0)
    parts["prefill_linear"] = cost.table_seconds(sum(p for p, _ in requests))
    parts["prefill_attention"] = cost.prefill_attention * sum(p * p / 2 for p, _ in requests) / 1000.0
    steps = max(o for _, o in requests)
    for j in range(steps - 1):
        active = [p for p, o in requests if o - 1 > j]
        parts["decode_linear"] += cost.table_seconds(len(active))
        parts["decode_attention"] += cost.context_token * sum(p + 1 + j for p in active)
    parts["cpu_step"] = steps * cpu_step_s
    parts["lm_head"] = steps * (cost.base - cpu_step_s)
    return parts


def simulate(pub: Published) -> dict[str, Any]:
    """The published workload on its profile: simulated figure, error, seconds per part."""
    cost, cpu, largest = _profile(pub.profile)
    lengths = pub.requests()
    reqs = [SimRequest(i, p, o) for i, (p, o) in enumerate(lengths)]
    prompts = sum(p for p, _ in lengths)
    # every prompt prefills in one iteration (a static batch; vLLM without chunked prefill at a token
    # budget above the prompts' sum) and every request holds its KV to the end
    res = simulate_replica(
        reqs, cost, max_num_seqs=len(reqs), budget=prompts, kv_tokens=sum(p + o for p, o in lengths)
    )
    parts = breakdown(cost, cpu, lengths)
    assert abs(sum(parts.values()) - res.end) <= 1e-9 * max(1.0, res.end), (parts, res.end)
    seconds = res.end
    if pub.metric == "ttft_ms":  # the first iteration alone
        parts = {
            **dict.fromkeys(PARTS, 0.0),
            "prefill_linear": parts["prefill_linear"],
            "prefill_attention": parts["prefill_attention"],
            "cpu_step": cpu,
            "lm_head": cost.base - cpu,
        }
        seconds = sum(parts.values())
    if pub.metric == "throughput_tok_s":
        sim = sum(o for _, o in lengths) / seconds / pub.tp
    else:
        sim = seconds * 1000.0
    return {
        **asdict(pub),
        "simulated": sim,
        "error": (sim - pub.value) / pub.value,
        "seconds": seconds,
        "parts_s": parts,
        "extrapolated": prompts > largest,
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench gpu_profile_validation`."""
    p.add_argument("--out", default=str(OUT), help="page to write (the JSON goes beside it)")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> None:
    """Simulate every published figure, write the page and its JSON."""
    rows = [simulate(pub) for pub in PUBLISHED]
    out = Path(args.out)
    out.write_text(page(rows), encoding="utf-8")
    out.with_suffix(".json").write_text(
        json.dumps({"label": "SIMULATED", "rows": rows}, indent=1), encoding="utf-8"
    )
    print(f"wrote {out} and {out.with_suffix('.json').name}")
