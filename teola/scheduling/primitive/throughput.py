"""Throughput-oriented batching (TO): like FIFO, but the batch to fill is the engine's pre-tuned
maximum efficient batch, and it waits up to `timeout` for it (Teola §7 baseline)."""

from __future__ import annotations

from teola.scheduling.base import Limits
from teola.scheduling.primitive.fifo import FifoPolicy


class ThroughputPolicy(FifoPolicy):
    name = "to"

    def __init__(self, timeout: float = 0.02, batch_size: int | None = None) -> None:
        super().__init__(timeout, batch_size)

    def target(self, limits: Limits) -> int:
        return min(self.batch_size or limits.max_efficient_batch, limits.max_batch)
