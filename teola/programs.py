"""Client programs: multi-call agentic programs that run outside the template API but still get
program-level scheduling (Autellix's stateful sessions).

    async with Program(app, "session-42") as prog:          # or Program(runtime, ...)
        plan = await prog.call("Plan the answer to ...", max_tokens=64)
        a = await prog.call(f"Step 1 of {plan}", parent_ids=[plan.call_id])
        b = await prog.call(f"Step 2 of {plan}", parent_ids=[plan.call_id])
        final = await prog.call(f"Combine {a} and {b}", parent_ids=[a.call_id, b.call_id])

Every call is one fused prefill+decode request queued on the runtime's engine scheduler for
`engine`, tagged with the program id as its query id, so the engine's policy ("plas", "atlas",
"mlfq", or any other) sees all calls of the program as one program. Parents are recorded in the
policy's process table (when the policy has one) so ATLAS computes exact critical-path priorities.
Leaving the `async with` block (or `await prog.end()`) removes the program from the process table.

This is an adapter over the runtime's engine scheduler (`runtime.schedulers[engine].submit`, the
`Pending` entry and its `work` callbacks); it does not go through the graph scheduler.
"""
from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any, Iterable

from teola.runtime.policies.base import Pending
from teola.runtime.requests import estimate_tokens, llm_request

# importing the program-aware policies registers "mlfq", "plas" and "atlas"
import teola.runtime.policies.atlas  # noqa: E402,F401
import teola.runtime.policies.mlfq  # noqa: E402,F401
import teola.runtime.policies.plas  # noqa: E402,F401

GEN_OPTIONS = ("max_tokens", "temperature", "stop", "ignore_eos")


class CallResult(str):
    """The text of one call (a `str`), with `call_id`, the engine's raw `result` dict and the name
    of the engine `instance` that ran it (e.g. "llm/1")."""

    call_id: str
    result: dict[str, Any]
    instance: str | None

    def __new__(cls, text: str, call_id: str, result: dict[str, Any], instance: str | None = None) -> "CallResult":
        obj = super().__new__(cls, text)
        obj.call_id = call_id
        obj.result = result
        obj.instance = instance
        return obj


class CallFailed(RuntimeError):
    """An LLM call of a program failed on its engine (the engine's exception is the cause)."""


class _CallWork:
    """The engine scheduler's per-entry callbacks, resolving one future."""

    __slots__ = ("future", "call_id", "started_at", "instance")

    def __init__(self, future: asyncio.Future, call_id: str) -> None:
        self.future = future
        self.call_id = call_id
        self.started_at: float | None = None
        self.instance: str | None = None

    def started(self, inst: Any, batch_id: str, batch_size: int, t: float) -> None:
        self.started_at = t
        self.instance = getattr(inst, "name", str(inst))

    def results(self, start: int, results: list[Any], t: float) -> None:
        if not self.future.done():
            self.future.set_result(results[0])

    def failed(self, exc: BaseException, inst: Any) -> None:
        if not self.future.done():
            err = CallFailed(f"call {self.call_id!r} failed on instance {getattr(inst, 'name', inst)}: "
                             f"{type(exc).__name__}: {exc}")
            err.__cause__ = exc
            self.future.set_exception(err)

    def item(self, text: Any, t: float) -> None:
        pass

    def final(self, result: Any, t: float) -> None:
        self.results(0, [result], t)


class Program:
    """One agentic program (session) on a running teola `App` or `Runtime`.

    target: an App (started on first call if needed) or a Runtime (already started).
    program_id: the session id; calls from different Program objects with the same id count as one
    program. engine: the LLM engine's name. system: an optional system prompt for every call."""

    def __init__(self, target: Any, program_id: str, engine: str = "llm", system: str | None = None) -> None:
        if not isinstance(program_id, str) or not program_id:
            raise ValueError(f"Program: program_id must be a non-empty string, got {program_id!r}")
        if not isinstance(engine, str) or not engine:
            raise ValueError(f"Program: engine must be an engine name, got {engine!r}")
        self.target = target
        self.program_id = program_id
        self.engine = engine
        self.system = system
        self._ids = itertools.count(1)
        self.calls = 0

    async def __aenter__(self) -> "Program":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.end()

    async def _scheduler(self) -> Any:
        rt = self.target
        if not hasattr(rt, "schedulers") and hasattr(rt, "start") and hasattr(rt, "engines"):
            await rt.start()  # an App
            rt = rt.runtime
        schedulers = getattr(rt, "schedulers", None)
        if not isinstance(schedulers, dict) or not schedulers:
            raise RuntimeError("Program: the runtime is not started (no engine schedulers); "
                               "await app.start() or runtime.start() first")
        if self.engine not in schedulers:
            raise ValueError(f"Program: no engine {self.engine!r}; engines: {sorted(schedulers)}")
        return schedulers[self.engine]

    async def call(self, prompt: str, parent_ids: Iterable[str] | None = None, call_id: str | None = None,
                   **gen: Any) -> CallResult:
        """Submit one LLM call of this program and wait for its text.

        parent_ids: ids of earlier calls of this program whose output this call depends on (ATLAS
        critical paths); None = unknown (the call inherits the program's critical path), [] = a
        root call. call_id: defaults to "call-<n>". gen: max_tokens, temperature, stop, ignore_eos
        (True: decode exactly max_tokens tokens, e.g. to fix output lengths in benchmarks)."""
        if not isinstance(prompt, str) or not prompt:
            raise ValueError("Program.call: prompt must be a non-empty string")
        unknown = sorted(set(gen) - set(GEN_OPTIONS))
        if unknown:
            raise TypeError(f"Program.call: unknown generation option(s) {unknown}; use {', '.join(GEN_OPTIONS)}")
        sched = await self._scheduler()
        cid = call_id or f"call-{next(self._ids)}"
        parts = ([["system", self.system]] if self.system else []) + [["user", prompt]]
        req = llm_request(parts, True, gen)
        now = time.perf_counter()
        table = getattr(sched.policy, "table", None)
        if table is not None:
            table.call_arrived(self.program_id, cid, now, None if parent_ids is None else list(parent_ids))
        loop = asyncio.get_running_loop()
        work = _CallWork(loop.create_future(), cid)
        entry = Pending(self.program_id, cid, "decoding", 0, now, [req],
                        [estimate_tokens(req)] if getattr(sched, "llm", True) else None, now, 0, work)
        sched.submit(entry)
        self.calls += 1
        try:
            result = await work.future
        except asyncio.CancelledError:
            sched.remove(entry)
            raise
        text = result.get("text", "") if isinstance(result, dict) else str(result)
        return CallResult(text, cid, result if isinstance(result, dict) else {"text": text}, work.instance)

    async def end(self) -> None:
        """The program ended: drop it from the engine policy's process table (and its instance pin)."""
        rt = self.target if hasattr(self.target, "schedulers") else getattr(self.target, "runtime", None)
        sched = getattr(rt, "schedulers", {}).get(self.engine) if rt is not None else None
        if sched is not None:
            sched.end_program(self.program_id)
