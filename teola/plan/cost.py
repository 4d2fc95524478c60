"""The planner's cost model of one model under an execution plan (tensor-parallel degree `tp`,
data-parallel degree `dp`): per-iteration cost, KV capacity and loading time, from a simulation
profile's "vllm" entry (IterationCost, fitted by `teola profile` or derived) and its "parallel"
section:

    "parallel": {"params_b": 6.74, "layers": 32, "hidden": 4096, "weights_gb": 13.5,
                 "kv_bytes_per_token": 524288, "gpu_memory_gb": 80, "memory_utilization": 0.9,
                 "tp_degrees": [1, 2, 4, 8], "nvlink_group": 2, "nvlink_gbps": 200, "pcie_gbps": 20,
                 "allreduce_latency_s": 1e-5, "step_overhead_s": 0.002,
                 "load": {"startup_s": 8, "read_gbps": 2.0, "tp_init_s": 4} | {"seconds": {"1": 12.5}},
                          (either with an optional "stop_s": 3.9, seconds to shut a model's instances down)}

Tensor parallelism over t devices divides the weight-reading part of `base` (base - step_overhead_s),
the per-token compute (prefill_token, decode_seq) and the KV reads (context_token) by t, and adds two
all-reduces per layer per iteration: latency 2 x layers x allreduce_latency_s, and per token
2 x layers x hidden x 2 bytes x 2(t-1)/t over NVLink inside an `nvlink_group`, PCIe beyond (the
paper's machine pairs its GPUs by NVLink). KV capacity of a replica: t x memory x utilization
minus the weights, over KV bytes per token. Loading: startup + weights / (t x read bandwidth) + a
TP initialisation when t > 1, unless measured seconds are given per degree; stopping: "stop_s"
(0 when not given). Prefix cache: a stage's requests share their leading blocks (entry "block_size",
16 when not given; "prefix_caching": false turns it off). A profile without a
"parallel" section allows tp=1 only, its KV pool from num_blocks x block_size. A profile built from
measured operators (`teola profile --from-measured`) gives "token_tables" per degree in its parallel
section, and a degree's iteration then uses its measured table instead of the scaling above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engines.sim.cost import IterationCost
from engines.sim.profile import load_profile


@dataclass(frozen=True, slots=True)
class Plan:
    """An execution plan: dp replicas of tp devices each."""

    tp: int
    dp: int

    @property
    def gpus(self) -> int:
        return self.tp * self.dp

    def __str__(self) -> str:
        return f"tp{self.tp}xdp{self.dp}"


class ModelCost:
    """One model's costs under any plan (see the module docstring)."""

    def __init__(self, profile: str | dict[str, Any], max_tokens: int | None = None) -> None:
        data = load_profile(profile)
        entry = data["engines"].get("vllm")
        if entry is None:
            raise ValueError(
                f"profile {data.get('name')!r} has no 'vllm' entry: the planner needs an LLM cost model"
            )
        self.name = str(data.get("name", profile))
        self.provenance = data["provenance"]
        self.entry = entry
        self.cost = IterationCost(**entry.get("cost", {}))
        self.par: dict[str, Any] = entry.get("parallel") or data.get("parallel") or {}
        self.max_num_seqs = int(entry.get("max_num_seqs", 256))
        self.budget = int(entry.get("max_num_batched_tokens", 8192))
        self.max_model_len = int(entry.get("max_model_len", 4096))
        self.token_ratio = float(entry.get("token_ratio", 1.15))
        self.template_tokens = int(entry.get("template_tokens", 12))
        self.params_b = float(self.par.get("params_b", 1.0))
        self.block_size = int(entry.get("block_size", 16))
        self.prefix_caching = bool(entry.get("prefix_caching", True))
        self.max_tokens = max_tokens

    def degrees(self) -> list[int]:
        """Tensor-parallel degrees that hold the weights and at least one full-length sequence."""
        return [t for t in self.par.get("tp_degrees", [1]) if self.kv_tokens(t) >= self.max_model_len]

    def plans(self, gpus: int) -> list[Plan]:
        return [Plan(t, d) for t in self.degrees() for d in range(1, gpus // t + 1)]

    def iteration(self, tp: int) -> IterationCost:
        c = self.cost
        if tp == 1:
            return c
        p = self.par
        measured = (p.get("token_tables") or {}).get(str(tp))
        if measured is not None:
            # built from measured operators (teola/sim/gpu_profile.py): the degree's own token table
            # (its all-reduces included); attention splits its heads over the degree
            return IterationCost(
                base=c.base,
                context_token=c.context_token / tp,
                prefill_attention=c.prefill_attention / tp,
                token_table=measured,
                decode_batch_factor=c.decode_batch_factor,
            )
        overhead = float(p.get("step_overhead_s", 0.0))
        link = float(p["nvlink_gbps"] if tp <= int(p.get("nvlink_group", 1)) else p["pcie_gbps"]) * 1e9
        layers, hidden = int(p["layers"]), int(p["hidden"])
        per_token = 2 * layers * hidden * 2 * 2 * (tp - 1) / tp / link
        return IterationCost(
            base=(c.base - overhead) / tp + overhead + 2 * layers * float(p["allreduce_latency_s"]),
            prefill_token=c.prefill_token / tp + per_token,
            decode_seq=c.decode_seq / tp + per_token,
            context_token=c.context_token / tp,
            prefill_attention=c.prefill_attention / tp,
            decode_batch_factor=c.decode_batch_factor,
        )

    def kv_tokens(self, tp: int) -> int:
        p = self.par
        if "kv_bytes_per_token" not in p:
            return (
                int(self.entry.get("num_blocks", 8192)) * int(self.entry.get("block_size", 16))
                if tp == 1
                else 0
            )
        free = tp * float(p["gpu_memory_gb"]) * float(p.get("memory_utilization", 0.9)) - float(
            p["weights_gb"]
        )
        return max(0, int(free * 1e9 / float(p["kv_bytes_per_token"])))

    def load_seconds(self, tp: int) -> float:
        load = self.par.get("load") or {}
        if "seconds" in load:
            given = {int(k): float(v) for k, v in load["seconds"].items()}
            if tp not in given:
                raise ValueError(
                    f"profile {self.name!r}: no measured load time for tp={tp} (has {sorted(given)})"
                )
            return given[tp]
        if not load:
            return 0.0
        weights = float(self.par.get("weights_gb", 0.0))
        return (
            float(load.get("startup_s", 0.0))
            + weights / (tp * float(load["read_gbps"]))
            + (float(load.get("tp_init_s", 0.0)) if tp > 1 else 0.0)
        )

    def stop_seconds(self, tp: int) -> float:
        """Seconds to shut the instances of a plan down (they stop together)."""
        return float((self.par.get("load") or {}).get("stop_s", 0.0))

    def cached_tokens(self, shared: int) -> int:
        """Prompt tokens the prefix cache serves of `shared` leading tokens common to the requests:
        the whole blocks among them."""
        return shared // self.block_size * self.block_size if self.prefix_caching else 0


def fit_load(samples: list[tuple[int, float, float]]) -> dict[str, float]:
    """Loading-cost coefficients from measured loads, (tp degree, weights GB, seconds) each:
    seconds = startup_s + weights / (tp x read_gbps) + tp_init_s x [tp > 1] (non-negative least squares)."""
    from teola.sim.fit import nnls

    if len(samples) < 3:
        raise ValueError(f"fitting load costs needs at least 3 measured loads, got {len(samples)}")
    rows = [[1.0, w / t, 1.0 if t > 1 else 0.0] for t, w, _ in samples]
    startup, inv_bw, tp_init = nnls(rows, [s for _, _, s in samples])
    if inv_bw <= 0:
        raise ValueError("the measured loads do not grow with weights / degree: cannot fit a read bandwidth")
    return {"startup_s": startup, "read_gbps": 1.0 / inv_bw, "tp_init_s": tp_init}
