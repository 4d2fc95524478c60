"""Choosing execution stages: SamuLLM's greedy search (Algorithm 1, adapted from Optimus) and the
two heuristics it is compared with. Each chooser looks at a StageEval (the job's state) and returns
the next stage; `plan_stages` repeats until every model has finished, ending each stage when its
first model finishes (then every running model's plan is reconsidered: preemption).

"greedy" is the paper's single pass: every stage starts from an empty set and stops adding when no
candidate raises the stage's throughput (GPUs may stay idle). "best-of-3" is a named deviation, not
the default: it searches three variants and keeps the fastest plan; its search time is the sum of
all three (docs/planning.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from teola.plan.cost import Plan
from teola.plan.stage_eval import Stage, StageEval, State
from teola.plan.workload import Workload

Chooser = Callable[[StageEval], Stage]
METHODS = ("greedy", "best-of-3", "max", "min")


@dataclass
class StageRecord:
    start: float
    duration: float
    plans: dict[str, Plan]
    loads: dict[str, float]
    finished: list[str]
    left: dict[str, int]  # requests each model still had at the stage's start


@dataclass
class Schedule:
    method: str
    stages: list[StageRecord]
    search_s: float
    simulations: int = 0
    gpus: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def completion_s(self) -> float:
        """Predicted inference time: the stages' durations (loading included)."""
        return sum(s.duration for s in self.stages)

    @property
    def end_to_end_s(self) -> float:
        """What the paper reports: the search time (extra time) plus the inference time."""
        return self.search_s + self.completion_s


def greedy(ev: StageEval, keep: bool = False, fill: bool = False) -> Stage:
    """Add, one at a time, the (model, plan) with the highest throughput gain per added GPU; a model
    already in the stage may only move to a plan with more GPUs. Stop when nothing fits or every
    candidate lowers the stage's throughput: with the defaults, the paper's Algorithm 1. keep: start
    from the running, unfinished models at their current plans (they may grow, not shrink or stop)
    instead of from an empty stage. fill: start loading models on the GPUs left idle (`_fill`).
    keep and fill are best-of-3's variants, not the paper's."""
    stage: Stage = {m: p for m, p in ev.state.loaded.items() if ev.unfinished(m)} if keep else {}
    while True:
        base, used = ev.throughput(stage), ev.gpus_of(stage)
        best, best_gain = None, 0.0
        for m in ev.eligible(stage):
            cost = ev.wl.models[m]
            for p in cost.plans(ev.gpus):
                if m in stage and p.gpus <= stage[m].gpus:
                    continue
                cand = {**stage, m: p}
                extra = ev.gpus_of(cand) - used
                if ev.gpus_of(cand) > ev.gpus or extra <= 0:
                    continue
                gain = (ev.throughput(cand) - base) / extra
                if gain > best_gain:
                    best, best_gain = cand, gain
        if best is None:
            return _fill(ev, stage) if fill else stage
        stage = best


def _fill(ev: StageEval, stage: Stage) -> Stage:
    """GPUs the gain rule leaves idle (a model still loading does no work before the stage ends)
    start loading the eligible model and plan that give the stage the highest throughput;
    its loading carries over to the next stage if that keeps its plan."""
    while True:
        free = ev.gpus - ev.gpus_of(stage)
        options = [
            (m, p)
            for m in ev.eligible(stage)
            if m not in stage
            for p in ev.wl.models[m].plans(ev.gpus)
            if p.gpus <= free
        ]
        if not options:
            return stage
        m, p = max(options, key=lambda mp: (ev.throughput({**stage, mp[0]: mp[1]}), mp[1].gpus))
        stage = {**stage, m: p}


def max_heuristic(ev: StageEval) -> Stage:
    """All GPUs to one model at a time (the first unfinished one in job order), with the plan under
    which it finishes first."""
    m = ev.eligible({})[0]
    plans = ev.wl.models[m].plans(ev.gpus)
    top = max(p.gpus for p in plans)
    return {m: min((p for p in plans if p.gpus == top), key=lambda p: ev.run(m, p, {m: p}).end)}


def min_heuristic(ev: StageEval) -> Stage:
    """As many models as possible at once, the GPUs split as evenly as possible (more to the models
    with more work left), each model with its fastest plan on its share."""
    names = _closure(ev)
    names.sort(
        key=lambda m: -sum(r.prompt + r.target for r in ev.wl.requests[m] if r.key not in ev.state.done[m])
    )
    kept: list[str] = []
    for m in names:  # at most one model per GPU, never one whose inputs come from a model left out
        if len(kept) < ev.gpus and all(not ev.unfinished(u) or u in kept for u in ev.wl.upstream[m]):
            kept.append(m)
    names = kept
    while names:
        k = len(names)
        shares = [ev.gpus // k + (1 if i < ev.gpus % k else 0) for i in range(k)]
        stage: Stage = {}
        for m, g in zip(names, shares):
            fits = [p for p in ev.wl.models[m].plans(ev.gpus) if p.gpus <= g]
            if fits:
                top = max(p.gpus for p in fits)
                stage[m] = min(
                    (p for p in fits if p.gpus == top), key=lambda p: ev.run(m, p, {**stage, m: p}).end
                )
        if len(stage) == k:
            return stage
        names = [m for m in names if m in stage] or names[: k - 1]
    raise ValueError("no model fits the GPUs")


def _closure(ev: StageEval) -> list[str]:
    """Models that can run together: unfinished ones whose upstream models are finished or included."""
    chosen: list[str] = []
    while True:
        more = [m for m in ev.eligible(dict.fromkeys(chosen, Plan(1, 1))) if m not in chosen]
        if not more:
            return chosen
        chosen.extend(more)


CHOOSERS: dict[str, Chooser] = {
    "greedy": greedy,
    "greedy-fill": lambda ev: greedy(ev, fill=True),
    "greedy-keep": lambda ev: greedy(ev, keep=True, fill=True),
    "max": max_heuristic,
    "min": min_heuristic,
}
# best-of-3's variants: the paper's pass, then two that load models ahead on idle GPUs
_VARIANTS = {
    "greedy": "from empty (the paper's pass)",
    "greedy-fill": "from empty, idle GPUs loading ahead",
    "greedy-keep": "keeping running models, idle GPUs loading ahead",
}


def plan_stages(
    wl: Workload, gpus: int, method: str = "greedy", state: State | None = None, max_stages: int = 10_000
) -> Schedule:
    """Stages until every model is done, chosen by `method`: "greedy" is the paper's Algorithm 1,
    one pass, every stage started from an empty set; "best-of-3" (a deviation, named) searches three
    times, from an empty stage, from an empty stage loading models ahead on the GPUs the gain rule
    leaves idle ("greedy-fill"), and starting each stage from the running models kept
    ("greedy-keep"), and returns the fastest plan with the three searches' time summed; "max" and
    "min" are the heuristics. Any chooser name of CHOOSERS also runs alone."""
    if method not in METHODS and method not in CHOOSERS:
        raise ValueError(f"unknown planning method {method!r}; methods: {', '.join(METHODS)}")
    if gpus < 1:
        raise ValueError(f"--gpus must be >= 1, got {gpus}")
    for m, cost in wl.models.items():
        if not cost.plans(gpus):
            raise ValueError(
                f"model {m!r} ({cost.name}) fits no plan on {gpus} GPUs (degrees {cost.degrees()})"
            )
    if method == "best-of-3":
        runs = {v: _plan(wl, gpus, v, state, max_stages) for v in _VARIANTS}
        name = min(runs, key=lambda v: runs[v].completion_s)
        best = runs[name]
        best.method, best.search_s = "best-of-3", sum(r.search_s for r in runs.values())
        best.simulations = sum(r.simulations for r in runs.values())
        best.notes.append(
            f"stages started {_VARIANTS[name]} ("
            + ", ".join(f"{r.completion_s:.1f} s {_VARIANTS[v]}" for v, r in runs.items())
            + ")"
        )
        return best
    return _plan(wl, gpus, method, state, max_stages)


def _plan(wl: Workload, gpus: int, method: str, state: State | None, max_stages: int) -> Schedule:
    t0 = time.perf_counter()
    state = state or State.start(wl)
    stages: list[StageRecord] = []
    sims = 0
    while any(len(state.done[m]) < len(r) for m, r in wl.requests.items()):
        if len(stages) >= max_stages:
            raise RuntimeError(f"planning did not finish within {max_stages} stages")
        ev = StageEval(wl, state, gpus)
        stage = CHOOSERS[method](ev)
        if not stage:
            raise RuntimeError(f"{method}: no stage could be formed at t={state.time:.1f}s")
        left = {m: len(wl.requests[m]) - len(state.done[m]) for m in stage}
        loads = {m: ev.run(m, p, stage).load for m, p in stage.items()}
        new, d = ev.apply(stage)
        sims += ev.sims
        finished = [m for m in stage if len(new.done[m]) == len(wl.requests[m])]
        stages.append(StageRecord(state.time, d, dict(stage), loads, finished, left))
        state = new
    return Schedule(method, stages, time.perf_counter() - t0, sims, gpus)
