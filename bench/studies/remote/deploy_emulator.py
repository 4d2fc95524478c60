"""The emulated LLM server of the deployment study (bench/studies/remote/deploy.py): `teola emulate` in a
child process on a free loopback port, and the vLLM counters it reports."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from bench.lib.results import ROOT, stop_process
from bench.lib.startup import wait_healthy
from bench.studies.remote.deploy_systems import MODEL

METRICS = (
    "vllm:request_success_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_hits_total",
    "process_cpu_seconds_total",
)


class Emulator:
    """`teola emulate --profile P --output-len max` in a child process on a free loopback port."""

    def __init__(self, profile: str, startup_timeout: float = 180.0) -> None:
        from bench.lib.remote_services import free_port

        self.profile, self.startup_timeout = profile, startup_timeout
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    async def __aenter__(self) -> Emulator:
        cmd = [
            sys.executable,
            "-m",
            "teola.cli",
            "emulate",
            "--profile",
            self.profile,
            "--port",
            str(self.port),
            "--output-len",
            "max",
            "--model",
            MODEL,
        ]
        self.proc = subprocess.Popen(cmd, cwd=ROOT)
        await wait_healthy(
            self.proc,
            f"{self.url}/health",
            self.startup_timeout,
            exited="teola emulate exited with code {code} during start-up",
            silent=f"teola emulate did not answer on {self.url} in {self.startup_timeout:.0f} s",
        )
        return self

    async def counters(self) -> dict[str, float]:
        """METRICS summed over their label sets."""
        import httpx

        async with httpx.AsyncClient(timeout=10.0) as client:
            text = (await client.get(f"{self.url}/metrics")).text
        out = {m: 0.0 for m in METRICS}
        for line in text.splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in out:
                out[name] += float(line.rsplit(" ", 1)[1])
        return out

    async def __aexit__(self, *exc: Any) -> None:
        await stop_process(self.proc)
