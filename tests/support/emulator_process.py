"""`teola emulate` in a subprocess on a free loopback port, for the emulator's tests."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
PROFILE = "a100-llama3.1-8b-measured"
MODEL = "smollm2-135m-instruct"
START_TIMEOUT = 180.0  # importing transformers for the tokenizer is most of it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmulatorProcess:
    """`teola emulate` in a subprocess; `url` once /health answers."""

    def __init__(self, *args: str, profile: str = PROFILE, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = ("--profile", profile, "--port", str(self.port), *args)
        self.start()

    def start(self) -> None:
        """Start the server (again, on the same port after `kill`); return once /health answers."""
        cmd = [sys.executable, "-m", "teola.cli", "emulate", *self.args]
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"teola emulate exited at start-up:\n{self.proc.stdout.read()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"teola emulate did not answer /health within {START_TIMEOUT:.0f} s")

    def kill(self) -> None:
        """SIGKILL the server, as a crash would, and reap it."""
        self.proc.kill()
        self.proc.communicate(timeout=30)

    def stop(self) -> str:
        """Stop the server; its output (the last line reports CPU per request)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        out, _ = self.proc.communicate(timeout=30)
        return out

    def cpu_seconds(self) -> float:
        """The server process's CPU seconds so far (process_cpu_seconds_total on its /metrics)."""
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        line = next(x for x in text.splitlines() if x.startswith("process_cpu_seconds_total "))
        return float(line.split()[1])
