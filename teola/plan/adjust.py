"""SamuLLM's dynamic scheduler (paper section 4.3): the running phase follows the planned stages and,
when the models finish in another order than the plan estimated, adjusts the next stage from what
is running, without searching again.

The plan is a list of stages, each {model: plan}; every (model, plan) pair of it is pending until it
is scheduled onto the GPUs or its model has finished. At each model's finish, for every unfinished
running model m with plan p:
- if no later stage holds m, m keeps running until it is done;
- if the next stage holding m gives it p again, m keeps running (that pair counts as scheduled);
- otherwise the pending pairs of the current stage are scheduled first, and m keeps p only if GPUs
  are still free; if not, m is stopped (its next pair stays pending).
A stage's pairs are all scheduled (or their models finished) before any pair of the next stage is
considered, so a pair that does not fit waits for the next finish. A pair is scheduled only when the
models it reads from are finished or running beside it (model-level pipelining)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from teola.plan.cost import Plan

Stage = dict[str, Plan]


class StageAdjuster:
    """Which (model, plan) pairs run after each finish, following `stages` (see the module docstring)."""

    def __init__(
        self, stages: Sequence[Mapping[str, Plan]], gpus: int, upstream: Mapping[str, set[str]] | None = None
    ) -> None:
        self.stages = [dict(s) for s in stages]
        self.gpus = gpus
        self.upstream = {m: set(v) for m, v in (upstream or {}).items()}
        self.pending = [set(s) for s in self.stages]  # models whose pair in that stage is not scheduled yet
        self.pos = 0  # the stage whose pairs are being scheduled
        self.started = False

    def first(self) -> Stage:
        """The pairs that run from the job's start: the first stage's."""
        return self.next({}, set())

    def next(self, running: Mapping[str, Plan], finished: set[str]) -> Stage:
        """The pairs to run now, given the ones running and the finished models (called at each finish)."""
        for pend in self.pending:
            pend -= finished
        running = {m: p for m, p in running.items() if m not in finished}
        if self.started and self.pos < len(self.stages) and not self.pending[self.pos]:
            self.pos += 1
        self.started = True
        kept: Stage = {}
        tentative: Stage = {}
        for m, p in running.items():
            nxt = self._next_pair(m)
            if nxt is None:
                kept[m] = p
            elif self.stages[nxt][m] == p:
                kept[m] = p
                self.pending[nxt].discard(m)
            else:
                tentative[m] = p
        out = dict(kept)
        free = self.gpus - sum(p.gpus for p in kept.values())
        if self.pos < len(self.stages):
            for m in list(self.stages[self.pos]):
                p = self.stages[self.pos][m]
                if (
                    m in self.pending[self.pos]
                    and p.gpus <= free
                    and self._inputs_run(m, out, tentative, finished)
                ):
                    out[m] = p
                    free -= p.gpus
                    self.pending[self.pos].discard(m)
                    tentative.pop(m, None)
        for m, p in tentative.items():
            if p.gpus <= free:
                out[m] = p
                free -= p.gpus
        # a scheduled pair whose input model got stopped could never finish: it waits for the next finish
        for m in [m for m in out if not self._inputs_run(m, out, {}, finished)]:
            p = out.pop(m)
            for i in range(self.pos, len(self.stages)):
                if self.stages[i].get(m) == p:
                    self.pending[i].add(m)
                    break
        return out

    def _next_pair(self, m: str) -> int | None:
        """The first stage from the current one where m's pair is pending."""
        for i in range(self.pos, len(self.stages)):
            if m in self.pending[i]:
                return i
        return None

    def _inputs_run(self, m: str, out: Stage, tentative: Stage, finished: set[str]) -> bool:
        return all(u in finished or u in out or u in tentative for u in self.upstream.get(m, ()))
