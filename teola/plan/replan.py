"""Re-planning at run time: a named deviation, off by default (`teola run-job --replan`). The paper
adjusts the stages at run time without searching again (teola.plan.adjust, the default); this
searches the rest of the plan again. The plan was searched with sampled output lengths; while the
job runs, the observed lengths of each (model, stage) are compared with the sampled ones, and when
their mean differs by more than `tolerance` (after `min_samples` observations), or a model finishes
before the model the plan expected to finish first, the remaining requests get lengths resampled
from what was observed and the greedy search runs again from the current state (finished
requests, running plans)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from teola.plan.lengths import StageLengths
from teola.plan.search import Schedule, plan_stages
from teola.plan.stage_eval import State
from teola.plan.workload import Workload


@dataclass
class Replanner:
    wl: Workload
    gpus: int
    tolerance: float = 0.25
    min_samples: int = 20
    observed: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    def sampled_mean(self, model: str, stage: str) -> float:
        xs = [r.target for r in self.wl.requests.get(model, []) if r.stage == stage]
        return statistics.fmean(xs) if xs else 0.0

    def observe(self, model: str, stage: str, num_output_tokens: int) -> None:
        self.observed.setdefault((model, stage), []).append(int(num_output_tokens))

    def diverged(self) -> list[tuple[str, str, float, float]]:
        """(model, stage, sampled mean, observed mean) of every pair past the tolerance."""
        out = []
        for (m, s), xs in self.observed.items():
            if len(xs) < self.min_samples:
                continue
            want, got = self.sampled_mean(m, s), statistics.fmean(xs)
            if want > 0 and abs(got - want) / want > self.tolerance:
                out.append((m, s, want, got))
        return out

    def should_replan(self, finished: list[str] | None = None, expected_first: str | None = None) -> bool:
        """True when lengths diverged, or a model finished before the one the plan expected first."""
        if self.diverged():
            return True
        return bool(finished) and expected_first is not None and expected_first not in finished

    def replan(self, state: State, seed: int = 1) -> Schedule:
        """Resample the remaining requests' lengths from the observations, then search again."""
        by_model: dict[str, dict[str, list[int]]] = {}
        for (m, s), xs in self.observed.items():
            by_model.setdefault(m, {})[s] = xs
        sampler = StageLengths(by_model=by_model, seed=seed)
        for m, reqs in self.wl.requests.items():
            for r in reqs:
                if r.key not in state.done[m] and sampler.values(m, r.stage) and m in by_model:
                    r.target = sampler.sample(m, r.stage, f"{r.group}:{r.key}", r.max_tokens)
        return plan_stages(self.wl, self.gpus, "greedy", state=state)
