"""Blind FIFO batching (the strawman of Teola §5.2): requests in arrival order, whatever their
primitive or query, until the batch is full or the oldest has waited `timeout` seconds."""

from __future__ import annotations

from teola.scheduling.base import Decision, Filler, Limits, Policy, RequestQueue


class FifoPolicy(Policy):
    name = "fifo"

    def __init__(self, timeout: float = 0.005, batch_size: int | None = None) -> None:
        """timeout: the longest the oldest request waits for a fuller batch. batch_size: the batch
        to fill (default: the engine's max batch)."""
        if timeout < 0:
            raise ValueError(f"fifo: timeout must be >= 0 seconds, got {timeout!r}")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"fifo: batch_size must be >= 1, got {batch_size!r}")
        self.timeout = timeout
        self.batch_size = batch_size

    def target(self, limits: Limits) -> int:
        return min(self.batch_size or limits.max_batch, limits.max_batch)

    def schedule(self, queue: RequestQueue, now: float, limits: Limits) -> Decision:
        if not queue:
            return Decision()
        oldest = next(iter(queue))
        fill = Filler(self.target(limits), limits.token_budget)
        for e in queue:
            if e.op != oldest.op:
                continue
            fill.take(e)
            if fill.full:
                break
        due = (
            oldest.arrival + self.timeout
        )  # the same float as the timer's deadline, so the timer's wake-up is due
        if fill.full or now >= due:
            return Decision(picks=fill.picks)
        return Decision(wait_until=due)
