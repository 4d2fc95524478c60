"""How one vLLM instance's processes are laid out on the machine, applied while its engine-core
process is spawned (it inherits the environment and the CPU affinity of the thread that spawns it).

- worker_process: True = vLLM's multiprocess executor (the model runs in a worker process of its own,
  beside the engine-core process); False = the model runs inside the engine-core process (vLLM's
  `VLLM_ENABLE_V1_MULTIPROCESSING=0`, the "uni" executor). On CPU the separate worker means two
  busy-polling processes per instance; see bench/results/overheads/engine_settings.md for what it costs here.
- cpu_threads_bind: the cores the instance computes on ("0", "1-3", "0,2"; "auto" / "nobind" are
  vLLM's own values). With a worker process it is vLLM's VLLM_CPU_OMP_THREADS_BIND; in-process, the
  engine core is started with that CPU affinity and as many OpenMP threads as cores.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

VLLM_KEYWORDS = ("auto", "nobind")


def parse_cpu_list(spec: str) -> list[int]:
    """ "0-2,5" -> [0, 1, 2, 5]. Raises ValueError naming the bad part."""
    cores: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"bad CPU list {spec!r}: {part!r} is not N or N-M")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"bad CPU list {spec!r}: {part!r} runs backwards")
        cores.extend(range(a, b + 1))
    return sorted(set(cores))


def cpu_list(cores: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5" (the inverse of `parse_cpu_list`)."""
    runs: list[list[int]] = []
    for c in sorted(set(cores)):
        if runs and c == runs[-1][-1] + 1:
            runs[-1].append(c)
        else:
            runs.append([c])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


@contextmanager
def spawn_layout(on_cpu: bool, worker_process: bool, cpu_threads_bind: str | None) -> Iterator[None]:
    """Set the environment (and, in-process on CPU, the calling thread's affinity) for spawning one
    instance's engine core; everything is restored afterwards, so instances can differ."""
    env: dict[str, str] = {"VLLM_ENABLE_V1_MULTIPROCESSING": "1" if worker_process else "0"}
    cores: list[int] | None = None
    if on_cpu and cpu_threads_bind is not None:
        if worker_process or cpu_threads_bind in VLLM_KEYWORDS:
            env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_threads_bind
        else:
            cores = parse_cpu_list(cpu_threads_bind)
            env["OMP_NUM_THREADS"] = str(len(cores))
    saved = {k: os.environ.get(k) for k in env}
    saved_affinity = os.sched_getaffinity(0) if cores is not None else None
    os.environ.update(env)
    try:
        if cores is not None:
            os.sched_setaffinity(0, cores)  # this thread only; the spawned engine core inherits it
        yield
    finally:
        if saved_affinity is not None:
            os.sched_setaffinity(0, saved_affinity)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
