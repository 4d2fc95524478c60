"""Engine-step counters of one vLLM instance (`VLLMEngine(step_stats=True)`): how many engine steps
ran and how many tokens they produced, so a benchmark can report vLLM's decode-batching efficiency
(generated tokens per decode step: 1.0 means every step decoded for one call only).

vLLM hands each step's IterationStats to its stat loggers in the front-end process; `StepCounter`
is one such logger (vLLM's `StatLoggerBase` interface, registered through `AsyncLLM`'s
`stat_loggers`). IterationStats is not a stable vLLM interface: a field this version lacks counts 0.
`StepCounter.log` also keeps the last LOG_STEPS steps one by one (when the front end handled it,
tokens generated, prompt tokens computed, requests running after it), so a benchmark can time
engine steps under load against a cost model (`python -m bench sim_trace_diff`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class StepCounts:
    steps: int = 0  # engine steps that returned outputs
    decode_steps: int = 0  # steps that generated at least one token
    generated_tokens: int = 0
    prompt_tokens: int = 0  # prompt tokens computed (prefill), cache hits excluded where vLLM says so
    preempted: int = 0  # requests vLLM itself preempted (out of KV blocks)

    def minus(self, earlier: StepCounts) -> StepCounts:
        """The counts since `earlier` (a snapshot taken with `copy`)."""
        return StepCounts(**{k: v - getattr(earlier, k) for k, v in asdict(self).items()})

    def copy(self) -> StepCounts:
        return StepCounts(**asdict(self))

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = asdict(self)
        out["tokens_per_decode_step"] = (
            self.generated_tokens / self.decode_steps if self.decode_steps else 0.0
        )
        return out


LOG_STEPS = 100_000


class StepCounter:
    """Counts for one engine; `factory` is what AsyncLLM's `stat_loggers` takes. `log`: the last
    LOG_STEPS steps as (time.time() when the front end handled the step's outputs, generated tokens,
    prompt tokens computed, requests running after the step; -1 when vLLM does not say)."""

    def __init__(self) -> None:
        self.counts = StepCounts()
        self.log: deque[tuple[float, int, int, int]] = deque(maxlen=LOG_STEPS)

    def factory(self, vllm_config: Any, engine_index: int = 0) -> Any:
        return stat_logger(self.record)

    def record(self, scheduler_stats: Any, iteration_stats: Any) -> None:
        """One engine step's stats (IterationStats None: a step without outputs, not counted)."""
        if iteration_stats is None:
            return
        counts = self.counts
        generated = int(getattr(iteration_stats, "num_generation_tokens", 0) or 0)
        counts.steps += 1
        counts.decode_steps += generated > 0
        counts.generated_tokens += generated
        prompt = getattr(iteration_stats, "prompt_token_stats", None)
        computed = getattr(prompt, "computed", None) if prompt is not None else None
        prompt_tokens = int(
            computed if computed is not None else getattr(iteration_stats, "num_prompt_tokens", 0) or 0
        )
        counts.prompt_tokens += prompt_tokens
        running = getattr(scheduler_stats, "num_running_reqs", None)
        self.log.append(
            (
                float(getattr(iteration_stats, "iteration_timestamp", 0.0) or 0.0),
                generated,
                prompt_tokens,
                int(running) if running is not None else -1,
            )
        )
        counts.preempted += int(getattr(iteration_stats, "num_preempted_reqs", 0) or 0)


def stat_logger(on_step: Callable[[Any, Any], None]) -> Any:
    """A vLLM stat logger (its StatLoggerBase interface, for AsyncLLM's `stat_loggers`) that hands each
    engine step's SchedulerStats and IterationStats to `on_step`, in the front-end process."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class _Logger(StatLoggerBase):
        def __init__(self) -> None:
            pass

        def record(
            self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None, engine_idx: int = 0
        ) -> None:
            on_step(scheduler_stats, iteration_stats)

        def log_engine_initialized(self) -> None:
            pass

    return _Logger()
