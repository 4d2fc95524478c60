"""The in-process vLLM engine's options, checked when the engine is built: a wrong type or value is
a ValueError naming the engine and the option."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engines.llm_text.costs import check_costs_option
from engines.vllm import kv_swap as vllm_kv_swap
from engines.vllm.layout import VLLM_KEYWORDS, parse_cpu_list


@dataclass(eq=False, repr=False)
class VLLMOptions:
    """The options of a vLLM instance (engines.vllm.engine.VLLMEngine), after its `name`.

    All optional: model (short name or HF folder; default "smollm2-135m-instruct"),
    dtype ("auto": the model's own, float32 on a CPU without native bfloat16), device (None = the platform
    vLLM was built for; "cpu"/"cuda" are checked against it), max_model_len (2048), max_num_seqs (16),
    max_num_batched_tokens (vLLM default), block_size (32 on CPU, so short partially prefilled prefixes are
    cached; vLLM's default, 16, on GPU), kv_cache_space_gib (CPU KV cache in whole GiB; default
    $VLLM_CPU_KVCACHE_SPACE or 1; sets that process-wide variable), gpu_memory_utilization (GPU only),
    enforce_eager (True on CPU), tensor_parallel_size (1), seed (0), max_tokens (default per request, 256),
    max_efficient_batch (min(max_num_seqs, 16)), costs (True: fitted at start by a short probe,
    engines/llm_text/cost_probe.py; a profile; False: none), engine_args (dict of extra `AsyncEngineArgs`
    fields, passed through), shutdown_timeout (seconds the engine core gets to exit cleanly before it is
    killed; 30), cpu_threads_bind (CPU only: the cores this instance's worker binds its threads to, vLLM's
    VLLM_CPU_OMP_THREADS_BIND for this instance alone: "auto" (vLLM's default: on x86 one core is kept for the
    engine-core scheduler and the worker gets the rest, so every instance on a 2-core machine lands on the
    same core), "nobind", or a list such as "0" or "2-3"; give each instance of a multi-instance engine its
    own cores), worker_process (True: vLLM's separate model-worker process; False: the model runs inside the
    engine-core process; default False on CPU, where the extra busy-polling process costs time on few cores,
    and vLLM's own default on GPUs; see engines/vllm/layout.py), kv_swap (False; True: load teola's KV
    connector, so a call aborted by teola's preemption saves its KV blocks to host memory when that beats
    recomputing them, and its resume loads them back; a call that pauses for a tool with pause_kv="swap" is
    saved the same way when it stops, and its continuation (same kv_key) loads it;
    engines/vllm/kv_connector.py), kv_swap_bytes (host-memory bound of kv_swap, default 2 GiB), kv_swap_costs
    (fix some of the measured swap/recompute costs: prefill_s_per_token, swap_bytes_per_s, swap_fixed_s),
    step_stats (False; True: count vLLM's engine steps and the tokens they produce, read with `step_counts()`;
    engines/vllm/step_stats.py), skip_known_prefixes (True: a partial prefill vLLM would not cache (under one
    KV block) or whose blocks this instance sent moments ago returns at once, "skipped";
    engines/llm_text/prefix_memo.py), share_cores (False; True on a CPU, with cpu_threads_bind a list of cores
    and the model in the engine-core process: the instance starts on all of the process's cores; while the
    other engines of this process that share cores are idle, the instance computes on all of the process's
    cores, and goes back to its own as soon as one of them has work; engines/machine/core_share.py, on by
    default on CPU machines through engines/tuning/settings.py).
    """

    name: str
    model: str = "smollm2-135m-instruct"
    dtype: str = "auto"
    device: str | None = None
    max_model_len: int = 2048
    max_num_seqs: int = 16  # VLLMEngine.default_profile.max_batch
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    kv_cache_space_gib: int | None = None
    gpu_memory_utilization: float | None = None
    enforce_eager: bool | None = None
    tensor_parallel_size: int = 1
    seed: int = 0
    max_tokens: int = 256
    max_efficient_batch: int | None = None
    costs: bool | str = True
    engine_args: dict[str, Any] | None = None
    shutdown_timeout: float = 30.0
    cpu_threads_bind: str | None = None
    worker_process: bool | None = None
    kv_swap: bool = False
    kv_swap_bytes: int | None = None
    kv_swap_costs: dict[str, float] | None = None
    step_stats: bool = False
    skip_known_prefixes: bool = True
    share_cores: bool = False

    def vllm_options(self) -> dict[str, Any]:
        """The options that are vLLM's own engine arguments (None: vLLM's default)."""
        return {
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "block_size": self.block_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "enforce_eager": self.enforce_eager,
            "tensor_parallel_size": self.tensor_parallel_size,
            "seed": self.seed,
        }

    def check(self) -> bool | str:
        """Raise ValueError naming this engine and the first option it cannot run with; returns the costs
        option."""
        check_options(
            self.name,
            max_model_len=self.max_model_len,
            max_num_seqs=self.max_num_seqs,
            tensor_parallel_size=self.tensor_parallel_size,
            max_tokens=self.max_tokens,
            max_num_batched_tokens=self.max_num_batched_tokens,
            block_size=self.block_size,
            max_efficient_batch=self.max_efficient_batch,
            device=self.device,
            kv_cache_space_gib=self.kv_cache_space_gib,
            cpu_threads_bind=self.cpu_threads_bind,
            worker_process=self.worker_process,
            engine_args=self.engine_args,
        )
        vllm_kv_swap.check_options(
            self.name, self.kv_swap, self.kv_swap_bytes, self.kv_swap_costs, self.engine_args or {}
        )
        costs = check_costs_option(self.name, self.costs)
        check_share_cores(self.name, self.share_cores)
        return costs


def check_options(
    name: str,
    *,
    max_model_len: Any,
    max_num_seqs: Any,
    tensor_parallel_size: Any,
    max_tokens: Any,
    max_num_batched_tokens: Any,
    block_size: Any,
    max_efficient_batch: Any,
    device: Any,
    kv_cache_space_gib: Any,
    cpu_threads_bind: Any,
    worker_process: Any,
    engine_args: Any,
) -> None:
    """Raise ValueError naming engine `name` and the first option vLLM would reject."""
    for field, value in (
        ("max_model_len", max_model_len),
        ("max_num_seqs", max_num_seqs),
        ("tensor_parallel_size", tensor_parallel_size),
        ("max_tokens", max_tokens),
    ):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"engine {name!r}: option {field} must be a positive int, got {value!r}")
    for field, value in (
        ("max_num_batched_tokens", max_num_batched_tokens),
        ("block_size", block_size),
        ("max_efficient_batch", max_efficient_batch),
    ):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(
                f"engine {name!r}: option {field} must be a positive int or omitted, got {value!r}"
            )
    _check_placement(name, device, kv_cache_space_gib, cpu_threads_bind, worker_process)
    if engine_args is not None and not isinstance(engine_args, dict):
        raise ValueError(f"engine {name!r}: option engine_args must be a dict of AsyncEngineArgs fields")


def _check_placement(
    name: str, device: Any, kv_cache_space_gib: Any, cpu_threads_bind: Any, worker_process: Any
) -> None:
    """Where the instance runs: its device, its CPU KV cache, its cores and its process layout."""
    if device not in (None, "cpu", "cuda", "xpu", "tpu", "rocm"):
        raise ValueError(
            f"engine {name!r}: option device must be one of cpu, cuda, xpu, tpu, rocm "
            f"(or omitted to use the platform vLLM was built for), got {device!r}"
        )
    if kv_cache_space_gib is not None and (not isinstance(kv_cache_space_gib, int) or kv_cache_space_gib < 1):
        raise ValueError(
            f"engine {name!r}: option kv_cache_space_gib must be a whole number of GiB >= 1 "
            f"(vLLM's VLLM_CPU_KVCACHE_SPACE), got {kv_cache_space_gib!r}"
        )
    if cpu_threads_bind is not None and (
        not isinstance(cpu_threads_bind, str) or not cpu_threads_bind.strip()
    ):
        raise ValueError(
            f"engine {name!r}: option cpu_threads_bind must be 'auto', 'nobind' or a CPU list "
            f"such as '0' or '0-1', got {cpu_threads_bind!r}"
        )
    if worker_process is not None and not isinstance(worker_process, bool):
        raise ValueError(
            f"engine {name!r}: option worker_process must be true, false or omitted, got {worker_process!r}"
        )
    if cpu_threads_bind is not None and cpu_threads_bind not in VLLM_KEYWORDS:
        try:
            parse_cpu_list(cpu_threads_bind)
        except ValueError as e:
            raise ValueError(f"engine {name!r}: option cpu_threads_bind: {e}") from None


def check_share_cores(name: str, share_cores: Any) -> None:
    """Raise ValueError naming engine `name` unless option share_cores is a bool."""
    if not isinstance(share_cores, bool):
        raise ValueError(f"engine {name!r}: option share_cores must be true or false, got {share_cores!r}")
