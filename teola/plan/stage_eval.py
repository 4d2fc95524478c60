"""Evaluating an execution stage (a set of models, each with an execution plan, running together on
the GPUs until the first of them finishes its remaining requests): each model's remaining requests
are simulated per replica (teola.sim.replica) after its loading time, downstream models in the
same stage get their requests as the upstream ones finish (model-level pipelining), and the stage's
throughput is its work (FLOPs ~ 2 x parameters x tokens processed) over its duration.

At a stage's start the models it stops (they leave it or change plan, finished ones included) shut
down together, each after its own loading if it is still loading, while the stage runs (a stop may
outlast a short stage); the models the stage starts load once every stop in flight is done
(teola run-job's executor does the same), so a new model's loading begins `leave_s` into the stage. A model
kept at its plan keeps running, or loading."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from teola.plan.cost import Plan
from teola.plan.workload import Request, Workload
from teola.sim.replica import SimRequest, simulate_replica, work_until

Stage = dict[str, Plan]
EPS = 1e-9


@dataclass
class State:
    """Where a job stands between stages."""

    done: dict[str, set[int]]
    progress: dict[str, dict[int, int]] = field(default_factory=dict)  # in-flight decoded tokens, per model
    loaded: dict[str, Plan] = field(default_factory=dict)  # plans running (or loading) at the boundary
    load_left: dict[str, float] = field(default_factory=dict)  # seconds of loading still to go
    stop_left: dict[str, float] = field(
        default_factory=dict
    )  # seconds until a stopped model's devices are free
    time: float = 0.0

    @classmethod
    def start(cls, wl: Workload) -> State:
        return cls({m: set() for m in wl.requests})


@dataclass
class ModelRun:
    load: float
    end: float  # stage-relative seconds at which its last runnable request finishes
    finish: dict[int, float]  # stage-relative finish time per request key
    curve: list[tuple[float, float]]
    progress: dict[int, int] = field(default_factory=dict)


class StageEval:
    """Simulations of candidate stages from one state (cached per model, plan and upstream plans)."""

    def __init__(self, wl: Workload, state: State, gpus: int) -> None:
        self.wl = wl
        self.state = state
        self.gpus = gpus
        self.cache: dict[tuple, ModelRun] = {}
        self.sims = 0

    def unfinished(self, m: str) -> bool:
        return len(self.state.done[m]) < len(self.wl.requests[m])

    def eligible(self, stage: Stage) -> list[str]:
        """Unfinished models whose upstream models are finished or in `stage`."""
        return [
            m
            for m in self.wl.requests
            if self.unfinished(m) and all(not self.unfinished(u) or u in stage for u in self.wl.upstream[m])
        ]

    def stops(self, stage: Stage) -> dict[str, float]:
        """Seconds into `stage` until each model being stopped has shut down: the ones it stops, and
        those still stopping from an earlier boundary (see the module docstring)."""
        st = self.state
        out = dict(st.stop_left)
        out.update(
            {
                m: st.load_left.get(m, 0.0) + self.wl.models[m].stop_seconds(p.tp)
                for m, p in st.loaded.items()
                if stage.get(m) != p
            }
        )
        return out

    def leave_s(self, stage: Stage) -> float:
        """Seconds into `stage` until every model being stopped has shut down."""
        return max(self.stops(stage).values(), default=0.0)

    def run(self, m: str, plan: Plan, stage: Stage, horizon: float = math.inf) -> ModelRun:
        ups = tuple(sorted((u, stage[u]) for u in self.wl.upstream[m] if u in stage and self.unfinished(u)))
        after = 0.0 if self.state.loaded.get(m) == plan else self.leave_s(stage)
        key = (m, plan, ups, after)
        if horizon == math.inf and key in self.cache:
            return self.cache[key]
        ready = {u: self.run(u, p, stage).finish for u, p in ups}
        out = self._simulate(m, plan, ready, horizon, after)
        if horizon == math.inf:
            self.cache[key] = out
        return out

    def _simulate(
        self, m: str, plan: Plan, ready: dict[str, dict[int, float]], horizon: float, after: float
    ) -> ModelRun:
        cost, st = self.wl.models[m], self.state
        keep = st.loaded.get(m) == plan
        load = st.load_left.get(m, 0.0) if keep else after + cost.load_seconds(plan.tp)
        done, carried = st.done[m], st.progress.get(m, {}) if keep else {}
        runnable: list[SimRequest] = []
        groups: dict[int, list[SimRequest]] = {}
        reqs = self.wl.requests[m]
        for r in reqs:
            if r.key in done:
                continue
            at = _ready_at(r, ready, st)
            if at == math.inf:
                continue
            sr = SimRequest(
                r.key,
                r.prompt,
                r.target,
                max(0.0, at - load),
                r.after if r.after is not None and r.after not in done else None,
                carried.get(r.key, 0),
                r.cached,
            )
            runnable.append(sr)
            groups.setdefault(r.group, []).append(sr)
        finish: dict[int, float] = {}
        progress: dict[int, int] = {}
        end = load
        self.sims += 1
        for part in _split(list(groups.values()), plan.dp):
            res = simulate_replica(
                part,
                cost.iteration(plan.tp),
                cost.max_num_seqs,
                cost.budget,
                cost.kv_tokens(plan.tp),
                horizon - load,
            )
            finish.update({k: load + t for k, t in res.finish.items()})
            progress.update(res.progress)
            end = max(end, load + res.end)
        if not runnable:  # its inputs come from models outside the stage: it cannot finish in it
            end = math.inf
        by_key = {r.key: r for r in runnable}
        events = sorted(finish.items(), key=lambda kv: kv[1])
        curve, total = [(load, 0.0)], 0.0
        for k, t in events:
            total += (by_key[k].prompt + by_key[k].target - by_key[k].done) * cost.params_b
            curve.append((t, total))
        return ModelRun(load, end, finish, curve, progress)

    def duration(self, stage: Stage) -> float:
        """The stage ends when its first model finishes its remaining requests."""
        d = min(self.run(m, p, stage).end for m, p in stage.items())
        if d == math.inf:
            raise ValueError(
                f"stage {sorted(stage)}: no model in it can finish (their inputs are outside it)"
            )
        return d

    def throughput(self, stage: Stage) -> float:
        """Work per second of the stage (work: 2 x parameters x tokens, as the paper's FLOPs)."""
        if not stage or all(self.run(m, p, stage).end == math.inf for m, p in stage.items()):
            return 0.0
        d = self.duration(stage)
        return sum(work_until(self.run(m, p, stage).curve, d) for m, p in stage.items()) / max(d, EPS)

    def gpus_of(self, stage: Stage) -> int:
        return sum(p.gpus for p in stage.values())

    def apply(self, stage: Stage) -> tuple[State, float]:
        """The state after running `stage` to its end, and its duration."""
        d = self.duration(stage)
        st = self.state
        done = {m: set(v) for m, v in st.done.items()}
        progress: dict[str, dict[int, int]] = {}
        loaded: dict[str, Plan] = {}
        left: dict[str, float] = {}
        for m, p in stage.items():
            full = self.run(m, p, stage)
            done[m] |= {k for k, t in full.finish.items() if t <= d + EPS}
            loaded[m] = p
            if full.load > d:  # still loading: the rest of it is paid only if the plan is kept
                left[m] = full.load - d
            else:
                progress[m] = {
                    k: n for k, n in self.run(m, p, stage, horizon=d).progress.items() if k not in done[m]
                }
        stopping = {m: t - d for m, t in self.stops(stage).items() if t - d > EPS}
        return State(done, progress, loaded, left, stopping, st.time + d), d


def _ready_at(r: Request, ready: dict[str, dict[int, float]], st: State) -> float:
    """Stage-relative time at which request r's inputs exist, plus its non-LLM delay (an app
    query's embedding, search...: counted from the job's start for a request without inputs, from
    its inputs' finish in this stage otherwise; inputs finished in an earlier stage: none left)."""
    if not r.deps:
        return max(0.0, r.delay - st.time)
    at = max((0.0 if k in st.done[u] else ready[u][k] if u in ready else math.inf for u, k in r.deps))
    return at + r.delay if at > 0.0 else at


def _split(groups: list[list[SimRequest]], dp: int) -> list[list[SimRequest]]:
    """Request groups over dp replicas, largest first onto the least loaded (keeps chains together)."""
    if dp == 1:
        return [[r for g in groups for r in g]]
    bins: list[list[SimRequest]] = [[] for _ in range(dp)]
    load = [0] * dp
    for g in sorted(groups, key=lambda g: -sum(r.prompt + r.target for r in g)):
        i = load.index(min(load))
        bins[i].extend(g)
        load[i] += sum(r.prompt + r.target for r in g)
    for b in bins:
        b.sort(key=lambda r: r.key)
    return [b for b in bins if b]
