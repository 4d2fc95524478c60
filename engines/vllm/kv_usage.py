"""The KV blocks one vLLM instance has in use, as its scheduler reports them after every engine step.

vLLM hands each step's SchedulerStats to its stat loggers in the front-end process; `KVUsage` is
one such logger (vLLM's `StatLoggerBase` interface, registered through `AsyncLLM`'s `stat_loggers`,
beside `step_stats.StepCounter`). Its `kv_cache_usage` is the fraction of the KV cache's blocks
held by requests: a block shared through the prefix cache counts once, a cached block no request
holds counts as free. The engine adapter turns it into `KVReport.used_blocks`
(engines.stream_events), which a program policy's admission counts on (teola.scheduling.kv_ledger).
SchedulerStats is not a stable vLLM interface: without the field, `used_blocks` stays None."""

from __future__ import annotations

from typing import Any

from engines.stream_events import KVReport
from engines.vllm.step_stats import stat_logger


class KVUsage:
    """The last reported usage of one engine; `factory` is what AsyncLLM's `stat_loggers` takes;
    `total`: the engine's KV blocks in all, set once it has started."""

    def __init__(self) -> None:
        self.usage: float | None = None  # fraction of the KV blocks in use after the last step
        self.steps = 0  # steps reported
        self.total = 0

    def due(self, prompt: int, decoded: int, block_size: int, seen: int) -> tuple[int, KVReport | None]:
        """A request's KV report, if one is due: at its first output (`seen` 0: no block reported
        yet) and whenever its `prompt` + `decoded` tokens have taken a block more than the `seen` it
        was last reported with. Returns the blocks it now holds and the report (None: not due)."""
        blocks = -(-(prompt + decoded) // block_size) if block_size > 0 else 1
        if seen and blocks <= seen:
            return seen, None
        used = self.used_blocks(self.total)
        return blocks, KVReport(
            prompt_tokens=prompt,
            block_size=max(block_size, 0),
            used_blocks=used,
            total_blocks=self.total if used is not None else None,
        )

    def used_blocks(self, total: int) -> int | None:
        """Blocks in use out of `total`, None before the first step (or if vLLM does not say)."""
        if self.usage is None or total <= 0:
            return None
        return min(total, max(0, round(self.usage * total)))

    def record(self, scheduler_stats: Any) -> None:
        """One step's SchedulerStats (None on a step without them)."""
        usage = getattr(scheduler_stats, "kv_cache_usage", None) if scheduler_stats is not None else None
        if usage is not None:
            self.usage = float(usage)
            self.steps += 1

    def factory(self, vllm_config: Any, engine_index: int = 0) -> Any:
        return stat_logger(lambda scheduler_stats, _: self.record(scheduler_stats))
