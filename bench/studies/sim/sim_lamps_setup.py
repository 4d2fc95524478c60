"""The systems and engine set-up of the SIMULATED LAMPS study (bench/studies/sim/sim_lamps.py): the
systems compared and the policy each runs, the default rates per mix, the engine set-up of a point and
the profile, policy, API types and costs it runs with."""

from __future__ import annotations

from typing import Any

from bench.studies.sim.sim_lamps_handling import _iteration_cost, fwd_seconds_per_token
from bench.studies.sim.sim_lamps_requests import MIXES, prediction_ratios

SYSTEMS = {"FCFS+INFERCEPT": "fcfs", "SJF": "sjf", "LAMPS": "lamps"}
# the earlier baseline, kept for comparison (--systems): teola's `fifo` sends calls as batches that return
# together; vLLM as INFERCEPT's and LAMPS' scripts run it (an API call ends the request: its KV is discarded
# and the call after the API is a new request at the back of the FCFS queue, recomputing its context)
EXTRA_SYSTEMS = {"FIFO-batches+INFERCEPT": "fifo", "FCFS-request+INFERCEPT": "fcfs-request", "vLLM": "fcfs"}
CAP = 64  # calls running in the engine at once, for every system
DEFAULT_RATES = "infercept=1,2,3,4;toolbench=2,4,8,12"
# the engine set-up of a run (run_point): calls teola lets into the engine, KV blocks (None: the
# profile's), admission bound by free KV (bench.studies.sim.kv_admission), LAMPS' profiled calls per batch
# (None: measured online)
DEFAULT_SETUP = {
    "cap": CAP,
    "kv_blocks": None,
    "kv_admission": False,
    "lamps_batch": None,
    "predictions": None,
    "prefix_caching": True,
    "drain": None,
    "api_scale": 1.0,
    "length_scale": 1.0,
    "starvation": None,
    "starvation_from": None,
    "engine_priority": False,
    "sigma": 0.8,
}


def point_config(profile: str, mix: str, system: str, setup: dict[str, Any]) -> tuple[Any, ...]:
    """A point's profile (its engine entry set up), policy, whether the engine ranks by priority, API
    types (durations scaled), the costs INFERCEPT's handling reads and the policy's options."""
    from engines.sim.profile import load_profile

    prof = load_profile(profile)
    policy = {**SYSTEMS, **EXTRA_SYSTEMS}[system]
    cap = setup["cap"]
    ranked_engine = setup["engine_priority"] and policy == "lamps"
    engine = {
        **prof["engines"]["vllm"],
        "enable_prefix_caching": setup["prefix_caching"],
        **({"num_blocks": setup["kv_blocks"]} if setup["kv_blocks"] else {}),
        **({"scheduling": "priority"} if ranked_engine else {}),
    }  # the profile entry's engine settings
    prof = {**prof, "engines": {**prof["engines"], "vllm": engine}}
    entry = prof["engines"]["vllm"]
    block = int(entry.get("block_size", 16))
    scale = float(setup["api_scale"])  # every API type's duration (mean and std) times this
    types = {k: ((d * scale, sd * scale), calls) for k, ((d, sd), calls) in MIXES[mix].items()}
    means = {k: v[0][0] for k, v in types.items()}
    costs = {
        "fwd": fwd_seconds_per_token(entry),
        "swap": float(entry.get("swap_seconds_per_block", 0.0)) / block,
        "api_means": means,
        "ratios": prediction_ratios(setup["predictions"]) if setup["predictions"] else None,
    }
    batch = setup["lamps_batch"] or "measured"
    options = {
        "lamps": {
            "step_s": _iteration_cost(entry).step_seconds(0, setup["lamps_batch"] or cap),
            "fwd_s_per_token": costs["fwd"],
            "swap_s_per_token": costs["swap"],
            "api_defaults": means,
            "batch_size": batch,
            **({"starvation": setup["starvation"]} if setup["starvation"] else {}),
            **({"starvation_from": setup["starvation_from"]} if setup.get("starvation_from") else {}),
        }
    }.get(policy, {})
    return prof, policy, ranked_engine, types, costs, options


def parse_rates(text: str) -> dict[str, tuple[float, ...]]:
    """ "infercept=1,2,3;toolbench=4,8" -> {mix: rates} (mixes not named are not run)."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        mix, _, rates = part.partition("=")
        if mix not in MIXES or not rates:
            raise SystemExit(f"--rates: expected mix=r1,r2;... with mixes {', '.join(MIXES)}, got {part!r}")
        out[mix] = tuple(float(x) for x in rates.split(","))
    return out
