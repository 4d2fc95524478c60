"""How one vLLM instance's engine core is started: vLLM's `AsyncEngineArgs` fields, chosen from the
adapter's options and the platform, and the CPU KV cache size vLLM reads from its environment."""

from __future__ import annotations

import os
from typing import Any

from engines.machine.hardware import cpu_llm_dtype
from engines.vllm import kv_swap as vllm_kv_swap

CPU_BLOCK_SIZE = 32


def set_kv_cache_space(gib: int | None) -> None:
    """Set VLLM_CPU_KVCACHE_SPACE (a process-wide variable) to `gib`, or to 1 GiB when it is unset."""
    if gib is not None:
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(gib)
    else:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def engine_args(
    options: dict[str, Any],
    model_path: str,
    on_cpu: bool,
    *,
    kv_swap: bool,
    kv_swap_bytes: int | None,
    share_cores: bool,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The `AsyncEngineArgs` fields of an instance: its set `options`, the platform's defaults, prefix
    caching and priority scheduling always, teola's KV connector with `kv_swap`, the core-lending
    worker extension with `share_cores` on a CPU, and last the user's own `extra` fields."""
    args = {k: v for k, v in options.items() if v is not None}
    args.setdefault("enforce_eager", on_cpu)
    if on_cpu:
        # vLLM's CPU block is 128 tokens and only full blocks are prefix-cached, so a ~60-token
        # instruction + question prefix would never be reused; 32 is the smallest at full speed
        args.update(
            block_size=args.get("block_size", CPU_BLOCK_SIZE), dtype=cpu_llm_dtype(args.get("dtype", "auto"))
        )
    args.update(
        model=model_path,
        tokenizer=model_path,
        enable_prefix_caching=True,
        scheduling_policy="priority",
        disable_log_stats=True,
    )
    if kv_swap:
        args.update(vllm_kv_swap.engine_args(kv_swap_bytes))
    if share_cores and on_cpu:
        args["worker_extension_cls"] = "engines.vllm.worker_cores.WorkerCores"
    args.update(extra)
    return args
