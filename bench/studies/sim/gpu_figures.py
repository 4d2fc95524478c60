"""The published end-to-end figures the measured-operator GPU profiles are checked against
(bench/studies/sim/gpu_profile_validation.py), each with its workload, metric and matching profile, and
the parts the simulated time is divided into."""

from __future__ import annotations

from dataclasses import dataclass

from bench.studies.sim.gpu_sources import (
    LAMBDA,
    LAMBDA_80,
    LAMBDA_80_LENGTHS,
    LAMBDA_LENGTHS,
    LAMBDA_NOTE,
    NEMO,
    PER_GPU,
    TRTLLM_LATENCY,
    TRTLLM_PEAK,
)


@dataclass(frozen=True, slots=True)
class Published:
    """One published end-to-end figure: a static batch of `batch` requests of `input` prompt tokens
    and `output` output tokens (the first from the prefill) on `gpu` at tensor-parallel degree `tp`."""

    source: str
    model: str
    gpu: str
    tp: int
    batch: int
    input: int
    output: int
    metric: str  # "latency_ms" (the batch's end-to-end time), "ttft_ms", "throughput_tok_s" (output tokens)
    #               "ttft_ms" is the prefill iteration (every prompt prefills in the first iteration)
    value: float
    profile: str
    note: str = ""
    lengths: tuple[tuple[int, int], ...] = ()  # per-request (prompt, output) when they differ

    def requests(self) -> list[tuple[int, int]]:
        return list(self.lengths) or [(self.input, self.output)] * self.batch


PUBLISHED = (
    Published(
        LAMBDA,
        "Llama-3-8B",
        "A100 80GB SXM",
        1,
        10,
        1369,
        1945,
        "throughput_tok_s",
        227.04,
        "a100-llama3.1-8b-measured",
        LAMBDA_NOTE,
        LAMBDA_LENGTHS,
    ),
    Published(
        LAMBDA,
        "Llama-3-8B",
        "A100 80GB SXM",
        1,
        10,
        1369,
        1945,
        "ttft_ms",
        139.23,
        "a100-llama3.1-8b-measured",
        LAMBDA_NOTE,
        LAMBDA_LENGTHS,
    ),
    Published(
        LAMBDA_80,
        "Llama-3-8B",
        "A100 80GB SXM",
        1,
        80,
        19504,
        14198,
        "throughput_tok_s",
        1197.26,
        "a100-llama3.1-8b-measured",
        LAMBDA_NOTE,
        LAMBDA_80_LENGTHS,
    ),
    Published(
        TRTLLM_PEAK,
        "Llama-2-7B",
        "A100 80GB",
        1,
        384,
        128,
        128,
        "throughput_tok_s",
        5586,
        "a100-llama2-7b-measured",
    ),
    Published(
        TRTLLM_PEAK,
        "Llama-2-7B",
        "A100 80GB",
        1,
        60,
        128,
        2048,
        "throughput_tok_s",
        1928,
        "a100-llama2-7b-measured",
    ),
    Published(
        TRTLLM_PEAK,
        "Llama-2-7B",
        "A100 80GB",
        1,
        52,
        2048,
        128,
        "throughput_tok_s",
        591,
        "a100-llama2-7b-measured",
    ),
    Published(
        TRTLLM_PEAK,
        "Llama-2-70B",
        "A100 80GB",
        4,
        1280,
        128,
        128,
        "throughput_tok_s",
        670,
        "a100-llama2-70b-tp4-measured",
        PER_GPU,
    ),
    Published(
        TRTLLM_PEAK,
        "Llama-2-70B",
        "A100 80GB",
        4,
        240,
        128,
        2048,
        "throughput_tok_s",
        525,
        "a100-llama2-70b-tp4-measured",
        PER_GPU,
    ),
    Published(
        TRTLLM_PEAK,
        "Llama-2-70B",
        "A100 80GB",
        4,
        120,
        2048,
        128,
        "throughput_tok_s",
        79,
        "a100-llama2-70b-tp4-measured",
        PER_GPU,
    ),
    Published(
        TRTLLM_LATENCY, "Llama-2-7B", "A100 80GB", 1, 1, 128, 1, "ttft_ms", 16, "a100-llama2-7b-measured"
    ),
    Published(
        TRTLLM_LATENCY, "Llama-2-7B", "A100 80GB", 1, 1, 2048, 1, "ttft_ms", 133, "a100-llama2-7b-measured"
    ),
    Published(
        TRTLLM_LATENCY,
        "Llama-2-70B",
        "A100 80GB",
        4,
        1,
        128,
        1,
        "ttft_ms",
        47,
        "a100-llama2-70b-tp4-measured",
    ),
    Published(
        TRTLLM_LATENCY,
        "Llama-2-70B",
        "A100 80GB",
        4,
        1,
        2048,
        1,
        "ttft_ms",
        377,
        "a100-llama2-70b-tp4-measured",
    ),
    *(
        Published(
            NEMO, "Llama-2-7B", "A100 80GB SXM4", 1, b, 128, 20, "latency_ms", ms, "a100-llama2-7b-measured"
        )
        for b, ms in ((1, 234.0), (2, 249.6), (4, 272.6), (8, 329.5))
    ),
    *(
        Published(
            NEMO, "Llama-2-7B", "H100 80GB HBM3", 1, b, 128, 20, "latency_ms", ms, "h100-llama2-7b-measured"
        )
        for b, ms in ((1, 153.8), (2, 160.8), (4, 174.8), (8, 199.2))
    ),
)

PARTS = ("prefill_linear", "prefill_attention", "decode_linear", "decode_attention", "cpu_step", "lm_head")
