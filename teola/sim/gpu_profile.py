"""A GPU simulation profile built from measured operator timings (`teola profile --from-measured`).

The LLM iteration of engines/sim/cost.py, priced for one model on one GPU type at one
tensor-parallel degree t:

- token table (measured): per iteration token count n (prefill tokens + decoding sequences),
  layers x the sum of the layer's operator medians at n tokens (linear between measured counts), plus
  the embedding lookup once, plus for t > 1 two NCCL all-reduces per layer of n x hidden x 2 bytes
  each (the all-reduce table of one node of t GPUs);
- base (assumed + derived): a per-step CPU overhead (assumed) plus the LM head, whose weights
  (vocab x hidden x 2 bytes / t) are read at the bandwidth the measured weight-reading operators
  achieve at 1 token (derived: layer weight bytes / their measured time);
- context_token (derived): decode attention reads each context token's K and V (2 x layers x KV
  heads x head dim x 2 bytes / t) at that same achieved bandwidth (a memory roofline: the tables hold
  no attention kernel);
- prefill_attention (assumed efficiency): 4 x hidden x layers / t FLOPs per (query, key) pair (QK^T
  and PV) at a sourced fraction of the datasheet's BF16 peak (teola/sim/gpu_specs.py).

The profile's "cost_provenance" names, per number, whether it is measured, derived or assumed and
from what. Everything but the LLM's cost and KV pool (other engines, vLLM settings) comes from a
base profile. Its "parallel" section carries a measured token table per tensor-parallel degree the
tables hold, which the planner (teola/plan/cost.py) uses instead of its derived scaling.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from teola.sim.gpu_specs import GPUS, MODEL_LAYERS, GpuSpec
from teola.sim.measured_ops import (
    GEMM_OPS,
    LAYER_OPS,
    OperatorTable,
    compute_file,
    interpolate,
    network_file,
    read_allreduce_table,
    read_operator_table,
)

VIDUR = "Vidur (microsoft/vidur, MIT licence; Agrawal et al., MLSys 2024)"
CPU_STEP_S = 0.002
CPU_STEP_SOURCE = (
    "assumed: vLLM V1's CPU-side step time (scheduling, input preparation, sampling), order "
    "of magnitude; the same 2 ms as the derived profiles"
)


def knot_tokens(max_tokens: int) -> list[int]:
    """The token counts a profile's table keeps: powers of 2 and 1.5 x powers of 2 up to the
    largest measured count (which is always kept)."""
    out, p = [], 1
    while p < max_tokens:
        out += [p] + ([p * 3 // 2] if p >= 2 and p * 3 // 2 < max_tokens else [])
        p *= 2
    return sorted(set(out + [max_tokens]))


def build_gpu_profile(
    data_dir: str | Path,
    gpu: str,
    model: str,
    tp: int = 1,
    *,
    base: dict[str, Any] | None = None,
    topology: str = "dgx",
    layers: int | None = None,
    name: str | None = None,
    cpu_step_s: float = CPU_STEP_S,
) -> dict[str, Any]:
    """The profile (engines/sim/profile.py's format) of `model` on `gpu` at tensor-parallel degree
    `tp`, from the measured tables in `data_dir` (see the module docstring); `base`: a loaded profile
    whose other entries and vLLM settings it keeps."""
    spec = GPUS.get(gpu)
    if spec is None:
        raise ValueError(f"--gpu: no datasheet figures for {gpu!r} (known: {', '.join(sorted(GPUS))})")
    if layers is None:
        if model not in MODEL_LAYERS:
            raise ValueError(
                f"--model {model!r}: layer count unknown (known: {', '.join(sorted(MODEL_LAYERS))}); "
                f"give --layers"
            )
        layers, layers_source = MODEL_LAYERS[model]
    else:
        layers_source = f"given on the command line: {layers} layers"
    table = read_operator_table(compute_file(data_dir, gpu, model))
    if tp not in table.degrees():
        raise ValueError(f"--tp {tp}: {table.path.name} has tensor-parallel degrees {table.degrees()}")
    allreduce = (
        read_allreduce_table(network_file(data_dir, gpu, topology)) if max(table.degrees()) > 1 else {}
    )
    shape = _Shape(table, layers)
    tables = {
        t: token_table(table, layers, t, allreduce.get(t))
        for t in table.degrees()
        if t == 1 or t in allreduce
    }
    cost, sources = _cost(shape, spec, tp, tables[tp], cpu_step_s)
    sources["token_table"]["source"] += f"; model shape: {layers_source}"
    entry = copy.deepcopy((base or {}).get("engines", {}).get("vllm", {}))
    util = float(entry.get("parallel", {}).get("memory_utilization", 0.9))
    block = int(entry.get("block_size", 16))
    free = tp * spec.memory_gb * util * 1e9 - shape.weight_bytes
    entry.update(
        cost=cost, cost_provenance=sources, num_blocks=max(0, int(free / shape.kv_bytes_per_token / block))
    )
    if tp == 1:
        entry["parallel"] = {**entry.get("parallel", {}), **_parallel(shape, spec, tables)}
    else:  # the planner reads a profile's cost as one GPU's: this one is a whole tp-GPU replica
        entry.pop("parallel", None)
    out = copy.deepcopy(base) if base else {"engines": {}}
    out.update(
        name=name or f"{gpu}-{model.lower()}-tp{tp}-measured",
        provenance="measured-operators",
        source=_source(spec, model, tp, topology, table, base),
    )
    out["engines"]["vllm"] = entry
    return out


class _Shape:
    """A model's sizes from its operator table's dimensions and its layer count."""

    def __init__(self, table: OperatorTable, layers: int) -> None:
        d = table.dims
        self.layers, self.hidden = layers, int(d["n_embd"])
        self.vocab = int(d["vocab_size"])
        kv_dim = self.hidden // int(d["n_head"]) * int(d["n_kv_head"])
        mlp = (3 if d["use_gated_mlp"] else 2) * self.hidden * int(d["n_expanded_embd"])
        self.layer_params = self.hidden * (self.hidden + 2 * kv_dim) + self.hidden * self.hidden + mlp
        self.params = layers * self.layer_params + 2 * self.vocab * self.hidden
        self.weight_bytes = 2 * self.params
        self.kv_bytes_per_token = 2 * layers * kv_dim * 2
        self.table = table

    def achieved_gbps(self, tp: int) -> float:
        """Bytes per second the weight-reading operators reach at 1 token (memory-bound there)."""
        return 2 * self.layer_params / tp / (self.table.layer_ms(tp, 1, GEMM_OPS) / 1000.0) / 1e9


def token_table(
    table: OperatorTable, layers: int, tp: int, allreduce: list[tuple[int, float]] | None
) -> list[list[float]]:
    """[[tokens, seconds], ...]: layers x the layer's operators + the embedding lookup once (+ two
    all-reduces per layer of tokens x hidden x 2 bytes when tp > 1), at knot_tokens."""
    hidden = int(table.dims["n_embd"])
    out = []
    for n in knot_tokens(max(table.tokens(tp))):
        ms = layers * table.layer_ms(tp, n) + table.op_ms(tp, n, "emb")
        if tp > 1:
            ms += 2 * layers * interpolate(allreduce or [], n * hidden * 2)
        out.append([n, round(ms / 1000.0, 7)])
    return out


def _cost(
    shape: _Shape, spec: GpuSpec, tp: int, table: list[list[float]], cpu_step_s: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    gbps = shape.achieved_gbps(tp)
    lm_head = 2 * shape.vocab * shape.hidden / tp / (gbps * 1e9)
    context = shape.kv_bytes_per_token / tp / (gbps * 1e9)
    attention = 1000 * 4 * shape.hidden * shape.layers / tp / (spec.bf16_tflops * 1e12 * spec.attention_mfu)
    cost = {
        "base": round(cpu_step_s + lm_head, 7),
        "prefill_token": 0.0,
        "decode_seq": 0.0,
        "context_token": float(f"{context:.4g}"),
        "prefill_attention": float(f"{attention:.4g}"),
        "token_table": table,
    }
    return cost, _cost_sources(shape, spec, tp, cpu_step_s, lm_head, gbps)


def _cost_sources(
    shape: _Shape, spec: GpuSpec, tp: int, cpu_step_s: float, lm_head: float, gbps: float
) -> dict[str, Any]:
    """Where each number of `_cost` comes from: measured (the operator tables), derived from them, or
    assumed (with the assumption's source)."""
    ar = " + 2 all-reduces per layer from the NCCL table" if tp > 1 else ""
    return {
        "token_table": {
            "kind": "measured",
            "source": f"{VIDUR} operator medians: {shape.layers} layers x "
            f"sum of {', '.join(LAYER_OPS)} + emb once{ar}, "
            f"tensor-parallel degree {tp}, from {shape.table.path.name}",
        },
        "base": {
            "kind": "assumed + derived",
            "parts": {
                "cpu_step_s": {"value": cpu_step_s, "kind": "assumed", "source": CPU_STEP_SOURCE},
                "lm_head_s": {
                    "value": round(lm_head, 7),
                    "kind": "derived",
                    "source": f"LM head weights {shape.vocab} x {shape.hidden} x 2 bytes / {tp} at the "
                    f"achieved bandwidth",
                },
            },
        },
        "achieved_gbps": {
            "value": round(gbps, 1),
            "kind": "derived",
            "source": f"measured: layer weight bytes ({2 * shape.layer_params / tp / 1e6:.1f} MB "
            f"per GPU) / the weight-reading operators' median time at 1 token "
            f"({', '.join(GEMM_OPS)}): {gbps / spec.hbm_gbps:.0%} of the datasheet's "
            f"{spec.hbm_gbps:g} GB/s ({spec.source})",
        },
        "context_token": {
            "kind": "derived",
            "source": f"decode attention as a memory roofline: KV bytes per "
            f"context token ({shape.kv_bytes_per_token} / {tp}) at the achieved bandwidth; the "
            f"tables hold no attention kernel",
        },
        "prefill_attention": {
            "kind": "assumed",
            "source": f"4 x hidden x layers / {tp} FLOPs per (query, "
            f"key) pair, per 1,000 pairs, at {spec.attention_mfu:.0%} of {spec.bf16_tflops:g} "
            f"TFLOPS BF16 ({spec.source}); {spec.attention_mfu_source}",
        },
        "prefill_token, decode_seq": {
            "kind": "none",
            "source": "0: the token table holds the per-token work",
        },
    }


def _parallel(shape: _Shape, spec: GpuSpec, tables: dict[int, list[list[float]]]) -> dict[str, Any]:
    return {
        "params_b": round(shape.params / 1e9, 2),
        "layers": shape.layers,
        "hidden": shape.hidden,
        "weights_gb": round(shape.weight_bytes / 1e9, 2),
        "kv_bytes_per_token": shape.kv_bytes_per_token,
        "gpu_memory_gb": spec.memory_gb,
        "tp_degrees": sorted(tables),
        "token_tables": {str(t): rows for t, rows in sorted(tables.items())},
    }


def _source(
    spec: GpuSpec, model: str, tp: int, topology: str, table: OperatorTable, base: dict[str, Any] | None
) -> str:
    kept = (
        f" Everything else (vLLM settings, the other engines, the parallel section's loading and link "
        f"figures) is kept from the derived profile {base.get('name')!r}."
        if base
        else ""
    )
    return (
        f"Built by `teola profile --from-measured` from operator timings measured on {spec.name} GPUs by "
        f"{VIDUR}, not measured here: {model}, {table.path.name}, NCCL all-reduce from "
        f"network__*_{topology}__all_reduce.csv.gz (one node). LLM iteration at tensor-parallel degree {tp}: "
        f"measured token table (linear layers + all-reduces per iteration token count) + derived decode "
        f"attention (KV reads at the measured achieved bandwidth) + prefill attention FLOPs at an assumed "
        f"efficiency + an assumed 2 ms CPU step; see engines.vllm.cost_provenance for each number. KV pool: "
        f"{tp} x {spec.memory_gb:g} GB x utilisation minus the weights (derived).{kept}"
    )
