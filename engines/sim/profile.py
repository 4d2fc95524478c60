"""Simulation profiles: per engine kind, the cost model a simulated engine of that kind runs with.

A profile is a JSON file:

    {"name": "cpu-smollm2-135m",
     "provenance": "measured" | "measured-operators" | "derived",
         # measured here by `teola profile`; built by `teola profile --from-measured` from operator
         # timings measured on GPUs elsewhere (teola/sim/gpu_profile.py); or derived from publications
     "source": "...",                        # where every number comes from
     "engines": {
        "vllm": {"cost": {"base": s, "prefill_token": s, "decode_seq": s, "context_token": s,
                          "prefill_attention": s,                          # optional
                          "decode_batch_factor": [[batch, factor], ...],   # the curve: optional
                          "token_table": [[tokens, s], ...]},              # optional (engines/sim/cost.py)
                 "max_num_seqs": 8, "max_num_batched_tokens": 2048, "num_blocks": 4096, "block_size": 16,
                 "token_ratio": 1.15, "lengths": {"text": [...], "split": [...]}, ...},
        "sentence_transformers": {"latency": {"1": s, "32": s}},      # seconds per batch of n, and/or
                                 {"op_cost": {"embedding": {"base": s, "per_item": s, "per_token": s,
                                                                "per_padded_token": s}}}  # (optional)
        "pgvector": {"op_latency": {"ingestion": {...}, "searching": {...}}},
        "reranker": {...}, "search": {...}, "tool": {...}},
     "device": {"exclusive": [...], "slowdown": {...}}}       # (optional) engines sharing one machine

"device" (engines/sim/device.py) says which kinds compute one batch at a time between them and how
much an op of one kind slows while another kind computes; without it engines are independent.

The "vllm" entry builds an `engines.sim.llm.SimLLM` (iteration-level); every other kind an
`engines.sim.sim_engine.SimEngine` with batch-latency curves (its outputs are deterministic
placeholders of the right shape). `simulated_engine` builds the adapter for one engine.
A profile is named by a path or by the name of a file shipped in engines/profiles/.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engines.machine.knee import knee
from engines.sim.device import DeviceShare
from engines.sim.llm import SimLLM
from engines.sim.sim_engine import SimEngine

PROFILE_DIR = Path(__file__).resolve().parents[1] / "profiles"
LLM_KINDS = ("vllm",)
PROVENANCES = ("measured", "measured-operators", "derived")
_KIND_OPS = {
    "sentence_transformers": ["embedding"],
    "reranker": ["reranking"],
    "pgvector": ["ingestion", "searching"],
    "search": ["searching"],
    "tool": ["tool"],
}
# options of a real engine that mean the same to the simulated one
_LLM_OPTIONS = ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "max_tokens", "seed")


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


def load_profile(profile: str | Path | dict[str, Any]) -> dict[str, Any]:
    """A profile by path, shipped name or as a dict; ValueError naming what is wrong."""
    if isinstance(profile, dict):
        data, where = profile, "profile"
    else:
        path = Path(profile)
        if not path.is_file():
            path = PROFILE_DIR / f"{profile}.json"
        if not path.is_file():
            raise ValueError(
                f"simulation profile {str(profile)!r} not found: not a file, and not one of the shipped "
                f"profiles ({', '.join(profile_names()) or 'none'}); `teola profile` writes one"
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"simulation profile {path}: not valid JSON ({e})") from None
        where = str(path)
    engines = data.get("engines") if isinstance(data, dict) else None
    if not isinstance(engines, dict) or not all(isinstance(v, dict) for v in engines.values()):
        raise ValueError(f'{where}: expected {{"engines": {{kind: {{...}}}}}}')
    if data.get("provenance") not in PROVENANCES:
        raise ValueError(
            f"{where}: 'provenance' must be one of {', '.join(PROVENANCES)}, got {data.get('provenance')!r}"
        )
    return data


def simulated_engine(
    name: str, kind: str, profile: str | Path | dict[str, Any], options: dict[str, Any] | None = None
) -> SimLLM | SimEngine:
    """The simulated adapter for engine `name` of `kind` under `profile` (the engine's own options
    that a simulated engine understands, such as max_num_seqs, override the profile's)."""
    data = load_profile(profile)
    entry = data["engines"].get(kind)
    if entry is None:
        raise ValueError(
            f"engine {name!r}: simulation profile {data.get('name', profile)!r} has no model of kind "
            f"{kind!r} (it has {', '.join(sorted(data['engines'])) or 'none'})"
        )
    options = options or {}
    device = DeviceShare.from_profile(kind, data.get("device"))
    if kind in LLM_KINDS:
        given = {k: options[k] for k in _LLM_OPTIONS if k in options}
        return SimLLM(name, **{**_llm_entry(entry), **given}, device=device)
    ops = entry.get("ops") or _KIND_OPS.get(kind)
    if not ops:
        raise ValueError(f"engine {name!r}: simulated kind {kind!r} needs 'ops' in its profile entry")
    max_batch = int(entry.get("max_batch", 64))
    return SimEngine(
        name,
        ops,
        latency=_curve(entry.get("latency")),
        op_latency={op: _curve(c) for op, c in (entry.get("op_latency") or {}).items()},
        op_cost=entry.get("op_cost"),
        max_batch=max_batch,
        max_efficient_batch=int(entry.get("max_efficient_batch") or _knee_of(entry, ops, max_batch)),
        serial=bool(entry.get("serial", True)),
        record=False,
        corpus=list(entry.get("corpus") or []),
        device=device,
    )


def _llm_entry(entry: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "cost",
        "max_num_seqs",
        "max_num_batched_tokens",
        "num_blocks",
        "block_size",
        "token_ratio",
        "template_tokens",
        "max_model_len",
        "max_tokens",
        "lengths",
        "seed",
        "scheduling",
        "preemption",
        "swap_seconds_per_block",
        "max_batch",
        "max_efficient_batch",
        "n_items",
        "abort_kv",
        "enable_prefix_caching",
    )
    return {k: entry[k] for k in keys if k in entry}


def _knee_of(entry: dict[str, Any], ops: Any, max_batch: int, tokens_per_item: int = 64) -> int:
    """The max efficient batch of a simulated engine without one in its profile: the knee
    (engines.machine.knee) of its latency curve, or of its main op's linear cost at `tokens_per_item`
    tokens per request; 16 when it has neither."""
    curve = _curve(entry.get("latency"))
    if not curve:
        for op in ops:
            cost = (entry.get("op_cost") or {}).get(op)
            if cost:
                per = cost.get("per_item", 0.0) + tokens_per_item * (
                    cost.get("per_token", 0.0) + cost.get("per_padded_token", 0.0)
                )
                curve = {b: cost.get("base", 0.0) + per * b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)}
                break
    curve = {b: t for b, t in curve.items() if b <= max_batch and t > 0}
    return knee(curve) if curve else 16


def _curve(curve: Any) -> dict[int, float]:
    """{"n": seconds} (JSON keys are strings) -> {n: seconds}."""
    if curve is None:
        return {}
    if not isinstance(curve, dict):
        raise ValueError(f"a latency curve is {{batch size: seconds}}, got {curve!r:.80}")
    return {int(k): float(v) for k, v in curve.items()}
