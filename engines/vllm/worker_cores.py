"""Moving a running vLLM instance to other CPU cores (teola's core lending, engines/machine/core_share.py).

`WorkerCores` is given to vLLM as its `worker_extension_cls`, so the model worker gains
`teola_use_cores`, which the engine calls through vLLM's `collective_rpc`: vLLM runs it between two
steps, in the process that computes the model."""

from __future__ import annotations

import os


class WorkerCores:
    """Mixed into vLLM's worker class."""

    def teola_use_cores(self, cores: list[int]) -> list[int]:
        """Compute on `cores` from the next step on: every thread of this process may run there, and
        torch's intra-op pool uses one thread per core. Returns the cores in force."""
        import torch

        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(tid), cores)
            except OSError:  # a thread that ended meanwhile
                pass
        # vLLM's CPU worker replaces torch.set_num_threads with a no-op once it bound its threads;
        # the binding underneath still sets the intra-op pool for the next step
        torch._C.set_num_threads(len(cores))
        return sorted(os.sched_getaffinity(0))
