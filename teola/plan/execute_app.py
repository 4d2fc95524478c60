"""`teola run-job` for an app_queries job (teola.plan.app_job): the job's N queries run through the
app itself, on one teola `Runtime` with the app's own engines built from the engine registry in
process (the compiled e-graph, the passes, the graph scheduler and every engine's scheduler, as
`App.run`), all submitted at the job's start; each LLM engine of the app gets the plan's data
parallelism as its instance count (the runtime gives instances of one engine disjoint cores; the
app's non-LLM engines run as the app declares them), and the job's model entries' "engine" options
are added to the app's LLM engines. Each LLM call goes to the engine's instances in turn (the
`round_robin` balancer, as the plan spreads the requests evenly over the replicas; the model's
engine option "balancer" chooses another). The measured completion is the last query's answer.
A program_runs job (teola.plan.program_job) runs its N program runs the same way, each
`program(target, i)` on the app's runtime.

The runtime's engine set is fixed while it runs, so the plan must give each LLM engine one plan for
the whole job, and all of them must fit the devices together: a plan that changes an engine's plan
between stages, or runs engines one after another on the same devices, is refused (named in
docs/planning.md); a single-LLM-engine app's plan is always one stage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from engines.requests import DECODE_OPS
from teola.balancers import DEFAULT_BALANCER, balancer_names
from teola.plan.app_job import PROGRAM_KIND, app_queries, count, load_app
from teola.plan.cost import Plan
from teola.plan.job import Job
from teola.plan.program_job import RUN, STAGE, CallLog, ProgramTarget, load_program
from teola.plan.workload import Workload

Say = Callable[[str], None]
_GENERATION = ("temperature", "seed", "kind")


def fixed_plans(stages: list[dict[str, Plan]], devices: int) -> dict[str, Plan]:
    """Each LLM engine's one plan over the stages (see the module docstring); ValueError otherwise."""
    plans: dict[str, Plan] = {}
    for i, st in enumerate(stages):
        for m, p in st.items():
            if plans.setdefault(m, p) != p:
                raise ValueError(
                    f"the plan changes {m!r} from {plans[m]} to {p} at stage {i + 1}: an app's queries run "
                    "on one runtime whose engines are fixed while it runs, so run-job runs an app job "
                    "only with one plan per LLM engine (docs/planning.md, deviations)"
                )
            if p.tp != 1:
                raise ValueError(
                    f"model {m!r}: plan {p} needs tensor parallelism, which run-job does not do locally"
                )
    need = sum(p.gpus for p in plans.values())
    if need > devices:
        raise ValueError(
            f"the app's LLM engines need {need} devices together "
            f"({', '.join(f'{m} {p}' for m, p in plans.items())}), "
            f"{devices} are available: run-job runs an app's engines side by side, not stage after stage"
        )
    return plans


def build_app(job: Job, plans: dict[str, Plan]) -> Any:
    """The job's app with its LLM engines sized by `plans` (and every engine simulated if the job says so)."""
    spec = job.spec
    app = load_app(spec["target"])
    if spec.get("simulate"):
        from teola.sim.run import use_profile

        use_profile(app, spec["simulate"])
    for m, plan in plans.items():
        engine = app.engines.get(m)
        if engine is None:
            raise ValueError(
                f"app {spec['target']!r} has no engine {m!r} (its engines: {', '.join(app.engines)})"
            )
        opts = {k: v for k, v in job.models[m].engine.items() if k not in _GENERATION}
        balancer = opts.pop("balancer", "round_robin")
        if balancer not in (DEFAULT_BALANCER, *balancer_names()):
            raise ValueError(
                f"model {m!r}: unknown balancer {balancer!r}; balancers: "
                f"{', '.join((DEFAULT_BALANCER, *balancer_names()))}"
            )
        engine.options.update(opts)
        engine.instances, engine.balancer, engine.balancer_options = plan.dp, balancer, {}
    return app


async def run_queries(job: Job, wl: Workload, app: Any, say: Say) -> dict[str, Any]:
    """Run the job's queries (or program runs) on `app`, all from the job's start (the app is started
    here and stopped at the end); measured times are seconds from the job's start."""
    loop = asyncio.get_running_loop()
    n = count(job.spec)
    t0 = loop.time()
    await app.start()
    events = [{"model": "app", "event": "load", "start_s": 0.0, "end_s": round(loop.time() - t0, 2)}]
    say(
        f"{app.name}: {n} {'program runs' if job.app == PROGRAM_KIND else 'queries'} on engines "
        + ", ".join(f"{name} x{e.instances}" for name, e in app.engines.items())
    )
    unit = _program_unit(job, app, t0) if job.app == PROGRAM_KIND else _query_unit(job, app, t0)
    calls: dict[int, list[tuple[str, str, float, int]]] = {}

    async def one(i: int) -> float:
        calls[i] = await unit(i)
        return loop.time() - t0

    try:
        finished = await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        t1 = loop.time()
        await app.stop()
        teardown = loop.time() - t1
    done_at, trace = _match(job, wl, calls)
    return {
        "measured_s": max(finished, default=0.0),
        "done_at": done_at,
        "trace": trace,
        "events": events,
        "teardown_s": teardown,
        "queries": n,
    }


Unit = Callable[
    [int], Awaitable[list[tuple[str, str, float, int]]]
]  # i -> (engine, stage, finished s, output tokens)


def _query_unit(job: Job, app: Any, t0: float) -> Unit:
    loop = asyncio.get_running_loop()
    config = dict(job.spec.get("config") or {})
    queries = app_queries(app, job.spec, count(job.spec))
    decode = {op.value for op in DECODE_OPS}

    async def unit(i: int) -> list[tuple[str, str, float, int]]:
        start = loop.time() - t0
        result = await app.run(queries[i], config)
        return [
            (
                r["engine"],
                r["primitive"].split(".")[0],
                start + float(r["finished"]),
                int(r["num_output_tokens"]),
            )
            for r in result.trace
            if r["op"] in decode and "num_output_tokens" in r
        ]

    return unit


def _program_unit(job: Job, app: Any, t0: float) -> Unit:
    program = load_program(job.spec["program"])
    log = CallLog(app.runtime)
    target = ProgramTarget(app, log)

    async def unit(i: int) -> list[tuple[str, str, float, int]]:
        token = RUN.set(i)
        try:
            await program(target, i)
        finally:
            RUN.reset(token)
        return [
            (c.engine, STAGE, c.finished - t0, int(c.result.get("num_output_tokens") or 0))
            for c in log.calls
            if c.run == i
        ]

    return unit


def _match(
    job: Job, wl: Workload, calls: dict[int, list[tuple[str, str, float, int]]]
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """When each model answered its last call, and every call's output tokens next to the planned
    request's (the query's or run's requests of that model, in the order its calls finished)."""
    done_at: dict[str, float] = {}
    trace: list[dict[str, Any]] = []
    for i in sorted(calls):
        mine = {m: [r for r in reqs if r.group == i] for m, reqs in wl.requests.items()}
        for m, stage, at, tokens in sorted(calls[i], key=lambda c: c[2]):
            if m not in mine:
                continue
            req = mine[m].pop(0) if mine[m] else None
            done_at[m] = max(done_at.get(m, 0.0), at)
            trace.append(
                {
                    "model": m,
                    "stage": job.models[m].lengths or stage,
                    "key": req.key if req else -1,
                    "num_output_tokens": tokens,
                    "predicted_tokens": req.target if req else 0,
                }
            )
    return done_at, trace
