"""The datasheet and model-card figures a GPU profile built from measured operators still needs, each
with its source: GPU peak bandwidth and FLOPS (for the attention model, which the measured tables
do not cover), the achievable attention FLOPS fraction (an assumption, sourced), and the layer counts
of the models whose operator tables exist (the tables give every other dimension)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU's datasheet figures and the assumed efficiency of prefill attention on it."""

    name: str
    hbm_gbps: float
    bf16_tflops: float
    memory_gb: float
    source: str
    attention_mfu: float
    attention_mfu_source: str


GPUS = {
    "a100": GpuSpec(
        "NVIDIA A100 80GB SXM",
        2039.0,
        312.0,
        80.0,
        "NVIDIA A100 Tensor Core GPU datasheet: HBM2e 2,039 GB/s, BF16 dense 312 TFLOPS, 80 GB",
        0.5,
        "assumed: the low end of the 50-73% of peak FLOPS FlashAttention-2 reaches in the "
        "forward pass on A100 (Dao 2023, arXiv:2307.08691), since prefill chunks are causal "
        "and often short",
    ),
    "h100": GpuSpec(
        "NVIDIA H100 80GB SXM",
        3350.0,
        989.0,
        80.0,
        "NVIDIA H100 Tensor Core GPU datasheet: HBM3 3.35 TB/s, BF16 dense 989 TFLOPS, 80 GB",
        0.35,
        "assumed: FlashAttention-2's 35% utilisation on H100 (Shah et al. 2024, "
        "FlashAttention-3, arXiv:2407.08608)",
    ),
}

# layers per model (the operator tables hold one layer): the models' published configurations
MODEL_LAYERS = {
    "Llama-2-7b-hf": (32, "Llama-2-7B: 32 layers (Touvron et al. 2023, Llama 2, Table 1; HF config)"),
    "Llama-2-70b-hf": (80, "Llama-2-70B: 80 layers (Touvron et al. 2023, Llama 2; HF config)"),
    "Meta-Llama-3-8B": (
        32,
        "Meta-Llama-3-8B: 32 layers (Meta Llama 3 model card; HF config); Llama-3.1-8B "
        "has the same layer shapes",
    ),
}
