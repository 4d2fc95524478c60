"""`teola run-job`: execute a plan on real engines through teola's runtime. Each (model, plan) of a
stage runs as dp engine instances, each behind a `teola.runtime.Runtime` of its own (its engine
scheduler batches the calls; the adapter comes from the engine registry, `engines.registry`, by the
model's "engine" kind, vllm by default), on devices of their own (here: CPU cores, one per
instance, so only tp=1 plans run locally); the job's requests go to a model's instances as
program calls (`Runtime.submit_call`) as soon as their inputs exist (a chain's requests stay on one
instance), and a stage ends when one of its models has answered all its requests, as the plan's
stages do (teola.plan.stage_eval): not later, when an instance the stage started is still loading. What runs
after each finish is the paper's dynamic scheduler's choice (teola.plan.adjust.StageAdjuster): the next
planned stage when the models finish in the planned order, adjusted from what is running when they do not,
without searching again (`--replan`, which searches again, is a named deviation and off by default). At a
stage boundary instances whose model leaves the stage or changes plan are stopped in the background, all at
once (their unfinished requests are sent again later: preemption; one still loading is stopped once
loaded), and the stage's new instances start loading in the background once those stops are done
(they need the devices); a model kept at its plan keeps running (or loading). The job completes
when its last request is answered; stopping the last instances after that is reported apart
(`teardown_s`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engines.requests import default
from teola.ir.engine_spec import Engine
from teola.plan import prompts
from teola.plan.adjust import StageAdjuster
from teola.plan.cost import Plan
from teola.plan.job import Job
from teola.plan.replan import Replanner
from teola.plan.stage_eval import State
from teola.plan.workload import Request, Workload
from teola.runtime import Runtime, llm_request

Say = Callable[[str], None]


@dataclass
class _Running:
    plan: Plan
    runtimes: list[Runtime]
    cores: list[int]
    tasks: dict[int, asyncio.Task] = field(default_factory=dict)
    loading: asyncio.Task | None = None  # the instances' start, in the background
    loaded: bool = False


class Executor:
    """Runs one job's workload through the stages of a plan (see the module docstring)."""

    def __init__(
        self,
        job: Job,
        wl: Workload,
        devices: list[int],
        say: Say,
        make_engine: Callable[..., Any] | None = None,
        runtime_options: dict[str, Any] | None = None,
    ) -> None:
        """make_engine(name, device, model spec) builds an instance's adapter (tests: simulated ones);
        None: the runtime's executor builds it from the registry. runtime_options: passed to each
        instance's Runtime (e.g. {"executor": "ray"})."""
        self.job = job
        self.wl = wl
        self.say = say
        self.make_engine = make_engine
        self.runtime_options = {"health_interval": 0, **(runtime_options or {})}
        self.devices = len(devices)
        self.free = list(devices)
        self.outputs: dict[str, dict[int, str]] = {m: {} for m in wl.requests}
        self.running: dict[str, _Running] = {}
        self.trace: list[dict[str, Any]] = []
        self.stage_log: list[dict[str, Any]] = []
        self.replans: list[dict[str, Any]] = []
        self.replanner: Replanner | None = None
        self.events: list[
            dict[str, Any]
        ] = []  # load / stop of each model's instances, s from the job's start
        self.done_at: dict[str, float] = {}  # when each model answered its last request
        self.teardown_s = 0.0
        self.stopping: dict[asyncio.Task, int] = {}  # stops in flight -> the devices they will free
        self.t0 = 0.0
        self.changed = asyncio.Event()
        self.dependents: dict[tuple[str, int], list[tuple[str, int]]] = {}
        for m, reqs in wl.requests.items():
            for r in reqs:
                for d in r.deps + (((m, r.after),) if r.after is not None else ()):
                    self.dependents.setdefault(d, []).append((m, r.key))

    def finished(self, m: str) -> bool:
        return len(self.outputs[m]) == len(self.wl.requests[m])

    async def run(
        self, stages: list[dict[str, Plan]], replanner: Replanner | None = None, max_replans: int = 3
    ) -> float:
        """Run the stages, adjusted at each finish by the paper's dynamic scheduler; with a
        `replanner` (a deviation), observed lengths are fed to it and, when it says so at a stage
        boundary, the rest of the plan is searched again from the job's current state."""
        t0 = self.t0 = _clock()
        self.replanner = replanner
        for i, st in enumerate(stages):
            need = sum(p.gpus for p in st.values())
            if need > self.devices:
                raise ValueError(f"stage {i + 1} needs {need} devices, {self.devices} are available")
        adjuster = StageAdjuster(stages, self.devices, self.wl.upstream)
        completed = 0.0
        try:
            stage = adjuster.first()
            while not all(self.finished(m) for m in self.wl.requests):
                await self._stage(len(self.stage_log), stage or self._leftover(), t0)
                if replanner is not None and len(self.replans) < max_replans and replanner.should_replan():
                    adjuster = StageAdjuster(self._replan(replanner), self.devices, self.wl.upstream)
                done = {m for m in self.wl.requests if self.finished(m)}
                stage = adjuster.next({m: r.plan for m, r in self.running.items()}, done)
            completed = max(self.done_at.values(), default=0.0)
        finally:
            t1 = _clock()
            for m in list(self.running):
                self._begin_stop(m)
            await asyncio.gather(*self.stopping, return_exceptions=True)
            self.teardown_s = _clock() - t1
        return completed

    def _now(self) -> float:
        return _clock() - self.t0

    def _replan(self, replanner: Replanner) -> list[dict[str, Plan]]:
        state = State(
            {m: set(out) for m, out in self.outputs.items()},
            loaded={m: r.plan for m, r in self.running.items()},
            time=0.0,
        )
        diverged = replanner.diverged()
        new = replanner.replan(state)
        replanner.observed.clear()  # the resampled lengths are the new baseline
        self.replans.append(
            {
                "after_stage": len(self.stage_log),
                "diverged": diverged,
                "predicted_rest_s": round(new.completion_s, 2),
            }
        )
        self.say(f"re-planned after stage {len(self.stage_log)}: {diverged}")
        return [dict(st.plans) for st in new.stages]

    def _leftover(self) -> dict[str, Plan]:
        """Only when the plan holds nothing more to run while models are unfinished (a plan for other
        requests, or a model stopped for good by the adjustment): each unfinished model whose inputs
        can be produced gets one device, as many as fit."""
        out: dict[str, Plan] = {}
        for m in self.wl.requests:
            if (
                not self.finished(m)
                and len(out) < self.devices
                and all(self.finished(u) or u in out for u in self.wl.upstream[m])
            ):
                out[m] = Plan(1, 1)
        return out

    async def _stage(self, i: int, stage: dict[str, Plan], t0: float) -> None:
        start = _clock() - t0
        for m in [m for m in self.running if self.running[m].plan != stage.get(m)]:
            self._begin_stop(m)
        new = [m for m in stage if m not in self.running]
        need, free = sum(stage[m].gpus for m in new), len(self.free) + sum(self.stopping.values())
        if need > free:
            raise ValueError(f"stage {i + 1} needs {need} more devices, {free} are free")
        for m in new:
            self._start(m, stage[m])
        self.say(
            f"stage {i + 1}: {', '.join(f'{m} {p}' for m, p in stage.items())} (started at {start:.1f} s)"
        )
        for m in stage:
            self._dispatch(m)
        while not any(self.finished(m) for m in stage):
            self._raise_failed_load()
            self.changed.clear()
            await self.changed.wait()
        self.stage_log.append(
            {
                "start_s": round(start, 2),
                "end_s": round(_clock() - t0, 2),
                "plans": {m: str(p) for m, p in stage.items()},
                "finished": [m for m in stage if self.finished(m)],
            }
        )

    def _raise_failed_load(self) -> None:
        for run in self.running.values():
            if run.loading is not None and run.loading.done() and run.loading.exception() is not None:
                raise run.loading.exception()

    def _start(self, m: str, plan: Plan) -> None:
        """Starts the instances in the background, on devices the stops in flight free; the model's
        requests are dispatched once they are loaded."""
        if plan.tp != 1:
            raise ValueError(
                f"model {m!r}: plan {plan} needs tensor parallelism, which run-job does not do locally"
            )
        run = _Running(plan, [], [])
        self.running[m] = run
        run.loading = asyncio.create_task(self._load(m, run, list(self.stopping)))

    async def _load(self, m: str, run: _Running, stops: list[asyncio.Task]) -> None:
        await asyncio.gather(*stops, return_exceptions=True)
        begin = self._now()
        run.cores = [self.free.pop(0) for _ in range(run.plan.dp)]
        run.runtimes = [self._runtime(m, k, core) for k, core in enumerate(run.cores)]
        try:
            await asyncio.gather(*(rt.start() for rt in run.runtimes))
            run.loaded = True
        finally:
            self.events.append(
                {
                    "model": m,
                    "plan": str(run.plan),
                    "event": "load",
                    "start_s": round(begin, 2),
                    "end_s": round(self._now(), 2),
                }
            )
            self.changed.set()
        if self.running.get(m) is run:
            self._dispatch(m)

    def _begin_stop(self, m: str) -> None:
        """Stops a model's instances in the background; their devices are free once it is done."""
        run = self.running.pop(m)
        task = asyncio.create_task(self._stop(m, run))
        self.stopping[task] = run.plan.gpus
        task.add_done_callback(lambda t: self.stopping.pop(t, None))

    async def _stop(self, m: str, run: _Running) -> None:
        begin = self._now()
        if run.loading is not None:  # an instance is not stopped while it starts: wait for it
            await asyncio.gather(run.loading, return_exceptions=True)
        for t in run.tasks.values():
            t.cancel()
        await asyncio.gather(*run.tasks.values(), return_exceptions=True)
        await asyncio.gather(*(rt.stop() for rt in run.runtimes), return_exceptions=True)
        self.free.extend(run.cores)
        self.events.append(
            {
                "model": m,
                "plan": str(run.plan),
                "event": "stop",
                "start_s": round(begin, 2),
                "end_s": round(self._now(), 2),
            }
        )

    def _ready(self, m: str, r: Request) -> bool:
        if r.after is not None and r.after not in self.outputs[m]:
            return False
        return all(k in self.outputs[u] for u, k in r.deps)

    def _dispatch(self, m: str, keys: list[int] | None = None) -> None:
        run = self.running.get(m)
        if run is None or not run.loaded:
            return
        reqs = self.wl.requests[m]
        for r in reqs if keys is None else [reqs[k] for k in keys]:
            if r.key not in self.outputs[m] and r.key not in run.tasks and self._ready(m, r):
                runtime = run.runtimes[r.group % len(run.runtimes)]
                run.tasks[r.key] = asyncio.create_task(self._call(m, r, runtime))

    def _runtime(self, m: str, k: int, core: int) -> Runtime:
        """One instance of model m on device `core`, behind a runtime of its own."""
        spec = self.job.models[m]
        opts = {key: v for key, v in spec.engine.items() if key not in ("temperature", "seed", "kind")}
        backend = self.make_engine(f"{m}-{k}", core, spec) if self.make_engine is not None else None
        if backend is None:
            opts = {"cpu_threads_bind": str(core), "max_tokens": spec.max_tokens, **opts}
        engine = Engine(m, spec.engine.get("kind", "vllm"), **opts)
        return Runtime({m: engine}, {m: backend} if backend is not None else None, **self.runtime_options)

    async def _call(self, m: str, r: Request, runtime: Runtime) -> None:
        upstream = [self.outputs[u][k] for u, k in r.deps]
        if r.after is not None:
            upstream = [self.outputs[m][r.after]]
        spec = self.job.models[m]
        gen = {"max_tokens": r.max_tokens, "temperature": float(default(spec.engine, "temperature"))}
        req = {
            **llm_request([["question", prompts.build(r.stage, r.inputs, upstream)]], True, gen),
            "seed": int(spec.engine.get("seed", 0)),
        }
        outcome = await runtime.submit_call(
            m, req, program=f"{self.job.name}:{m}:{r.group}", call_id=f"{m}:{r.key}", parents=None
        )
        out = outcome.result
        self.outputs[m][r.key] = out["text"]
        self.running[m].tasks.pop(r.key, None)
        if self.finished(m):
            self.done_at[m] = self._now()
        stage = spec.lengths or r.stage
        self.trace.append(
            {
                "model": m,
                "stage": stage,
                "key": r.key,
                "num_output_tokens": out["num_output_tokens"],
                "predicted_tokens": r.target,
            }
        )
        if self.replanner is not None:
            self.replanner.observe(m, r.stage, out["num_output_tokens"])
        for dm, dk in self.dependents.get((m, r.key), []):
            self._dispatch(dm, [dk])
        self.changed.set()


def _clock() -> float:
    """The running event loop's time (real on asyncio's loop, virtual in the simulator's)."""
    return asyncio.get_running_loop().time()
