"""The in-process vLLM engine's options, checked when the engine is built: a wrong type or value is
a ValueError naming the engine and the option."""
from __future__ import annotations

from typing import Any

from engines.vllm.layout import VLLM_KEYWORDS, parse_cpu_list


def check_options(name: str, *, max_model_len: Any, max_num_seqs: Any, tensor_parallel_size: Any, max_tokens: Any,
                  max_num_batched_tokens: Any, block_size: Any, max_efficient_batch: Any, device: Any,
                  kv_cache_space_gib: Any, cpu_threads_bind: Any, worker_process: Any, engine_args: Any) -> None:
    """Raise ValueError naming engine `name` and the first option vLLM would reject."""
    for field, value in (("max_model_len", max_model_len), ("max_num_seqs", max_num_seqs),
                         ("tensor_parallel_size", tensor_parallel_size), ("max_tokens", max_tokens)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"engine {name!r}: option {field} must be a positive int, got {value!r}")
    for field, value in (("max_num_batched_tokens", max_num_batched_tokens), ("block_size", block_size),
                         ("max_efficient_batch", max_efficient_batch)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"engine {name!r}: option {field} must be a positive int or omitted, got {value!r}")
    if device not in (None, "cpu", "cuda", "xpu", "tpu", "rocm"):
        raise ValueError(f"engine {name!r}: option device must be one of cpu, cuda, xpu, tpu, rocm "
                         f"(or omitted to use the platform vLLM was built for), got {device!r}")
    if kv_cache_space_gib is not None and (not isinstance(kv_cache_space_gib, int) or kv_cache_space_gib < 1):
        raise ValueError(f"engine {name!r}: option kv_cache_space_gib must be a whole number of GiB >= 1 "
                         f"(vLLM's VLLM_CPU_KVCACHE_SPACE), got {kv_cache_space_gib!r}")
    if cpu_threads_bind is not None and (not isinstance(cpu_threads_bind, str) or not cpu_threads_bind.strip()):
        raise ValueError(f"engine {name!r}: option cpu_threads_bind must be 'auto', 'nobind' or a CPU list "
                         f"such as '0' or '0-1', got {cpu_threads_bind!r}")
    if worker_process is not None and not isinstance(worker_process, bool):
        raise ValueError(f"engine {name!r}: option worker_process must be true, false or omitted, "
                         f"got {worker_process!r}")
    if cpu_threads_bind is not None and cpu_threads_bind not in VLLM_KEYWORDS:
        try:
            parse_cpu_list(cpu_threads_bind)
        except ValueError as e:
            raise ValueError(f"engine {name!r}: option cpu_threads_bind: {e}") from None
    if engine_args is not None and not isinstance(engine_args, dict):
        raise ValueError(f"engine {name!r}: option engine_args must be a dict of AsyncEngineArgs fields")
