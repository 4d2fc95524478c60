"""Jobs of a `Program`'s runs (`"app": "program_runs"`): N runs of a client program, an async
function `program(target, i)` (named `module:attr`) that makes its LLM calls through
`teola.api.Program(target, ...)` on the engines of the job's app (`target`).

A Program's calls are only known as it runs, so the plan takes them from a sampled trace: `samples`
runs (default 8, at most N), one at a time, on the app with every engine simulated from
`steps_profile` (virtual time), with each call of `Runtime.submit_call` timed (`CallLog`). A call
reads every call that had finished when it was submitted (what the program could have read, a
superset of its real inputs), and waits `delay`, the seconds from the latest of them (or the run's
start) to its submission: the program's own work between calls (tools, parsing). Its prompt and
prefix-cached tokens and max_tokens are the trace's; its output length is sampled (stage "call").
Run i takes trace i mod samples. Limit, stated: the simulated engines answer with placeholder
texts, so a program whose later calls depend on what its outputs say is planned from the path the
placeholders lead it down (`teola run-job --trace` records the real lengths, not the real path).
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from teola.plan.app_job import Call, simulated_app

STAGE = "call"
RUN: contextvars.ContextVar[int] = contextvars.ContextVar("teola_plan_run", default=-1)


@dataclass(slots=True)
class LoggedCall:
    run: int
    engine: str
    submitted: float
    finished: float
    max_tokens: int
    result: dict[str, Any]


class CallLog:
    """A started Runtime whose `submit_call`s are timed and kept (by run, `RUN`); the rest is the
    runtime's."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.calls: list[LoggedCall] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runtime, name)

    async def submit_call(self, engine: str, request: dict[str, Any], **kw: Any) -> Any:
        loop = asyncio.get_running_loop()
        submitted = loop.time()
        outcome = await self.runtime.submit_call(engine, request, **kw)
        self.calls.append(
            LoggedCall(
                RUN.get(),
                engine,
                submitted,
                loop.time(),
                int(request.get("max_tokens") or 0),
                dict(outcome.result),
            )
        )
        return outcome


class ProgramTarget:
    """What a program function gets as its target: the job's app, its runtime seen through a CallLog."""

    def __init__(self, app: Any, log: CallLog) -> None:
        self.app = app
        self.log = log

    async def start(self) -> None:
        """The app is started by the job."""

    @property
    def runtime(self) -> CallLog:
        return self.log

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)


def load_program(spec: str) -> Callable[[Any, int], Any]:
    """The async function `module:attr` names (the working directory is searched too)."""
    module_name, _, attr = str(spec).partition(":")
    if not module_name or not attr:
        raise ValueError(f"job 'program': expected module:function, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"job 'program' {spec!r}: {e}") from None
    if not callable(fn):
        raise ValueError(f"job 'program' {spec!r} is not a function program(target, i)")
    return fn


def record(spec: dict[str, Any], profile: str | None) -> list[list[Call]]:
    """The calls of `samples` runs of the job's program (see the module docstring)."""
    from teola.sim.virtual_loop import run_virtual

    app, samples = simulated_app(spec, profile)
    return run_virtual(record_runs(app, load_program(spec["program"]), samples))


async def record_runs(app: Any, program: Callable[[Any, int], Any], samples: int) -> list[list[Call]]:
    """The calls of `samples` runs, one at a time, on the (simulated) app (see the module docstring)."""
    loop = asyncio.get_running_loop()
    out = []
    await app.start()
    try:
        log = CallLog(app.runtime)
        for i in range(samples):
            start = loop.time()
            token = RUN.set(i)
            try:
                await program(ProgramTarget(app, log), i)
            finally:
                RUN.reset(token)
            out.append(calls_of_run([c for c in log.calls if c.run == i], start))
    finally:
        await app.stop()
    return out


def calls_of_run(logged: list[LoggedCall], start: float) -> list[Call]:
    """Planned calls from one run's timed calls (see the module docstring)."""
    logged = sorted(logged, key=lambda c: c.submitted)
    calls = []
    for i, c in enumerate(logged):
        deps = tuple(j for j in range(i) if logged[j].finished <= c.submitted)
        since = max((logged[j].finished for j in deps), default=start)
        prompt = int(c.result.get("num_prompt_tokens") or 1)
        calls.append(
            Call(
                c.engine,
                STAGE,
                prompt,
                min(int(c.result.get("num_cached_tokens") or 0), prompt - 1),
                c.max_tokens or int(c.result.get("num_output_tokens") or 1),
                deps,
                max(0.0, c.submitted - since),
            )
        )
    return calls
