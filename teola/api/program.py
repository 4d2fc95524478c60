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

Each call goes through `Runtime.submit_call` (the engine scheduler, not the graph scheduler).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from teola.api.tool_calls import TOOL_INSTRUCTION, continue_with_tools
from teola.runtime import HANDLINGS, CallFailed, Runtime, llm_request

GEN_OPTIONS = ("max_tokens", "temperature", "stop", "ignore_eos")
__all__ = ["CallFailed", "CallResult", "Program"]


class CallResult(str):
    """The text of one call (a `str`), with `call_id`, the engine's raw `result` dict and the name
    of the engine `instance` that ran it (e.g. "llm/1")."""

    call_id: str
    result: dict[str, Any]
    instance: str | None

    def __new__(
        cls, text: str, call_id: str, result: dict[str, Any], instance: str | None = None
    ) -> CallResult:
        obj = super().__new__(cls, text)
        obj.call_id = call_id
        obj.result = result
        obj.instance = instance
        return obj


class Program:
    """One agentic program (session) on a running teola `App` or `Runtime`.

    target: an App (started on first call if needed) or a Runtime (already started).
    program_id: the session id; calls from different Program objects with the same id count as one
    program. engine: the LLM engine's name. system: an optional system prompt for every call.
    predictor: an optional `prompt -> predicted output tokens` function (e.g. a
    teola.scheduling.program.length_predictor.LengthPredictor over prompt embeddings); its prediction goes
    with every call as the hint `predicted_tokens`, which the `lamps` and `sjf` policies rank by."""

    def __init__(
        self,
        target: Any,
        program_id: str,
        engine: str = "llm",
        system: str | None = None,
        predictor: Any = None,
    ) -> None:
        if not isinstance(program_id, str) or not program_id:
            raise ValueError(f"Program: program_id must be a non-empty string, got {program_id!r}")
        if not isinstance(target, Runtime) and not callable(getattr(target, "start", None)):
            raise TypeError(f"Program: target must be a teola App or Runtime, got {type(target).__name__}")
        if not isinstance(engine, str) or not engine:
            raise ValueError(f"Program: engine must be an engine name, got {engine!r}")
        self.target = target
        self.program_id = program_id
        self.engine = engine
        self.system = system
        if predictor is not None and not callable(predictor):
            raise TypeError("Program: predictor must be a function prompt -> predicted output tokens")
        self.predictor = predictor
        self._ids = itertools.count(1)
        self.calls = 0

    async def __aenter__(self) -> Program:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.end()

    async def _runtime(self) -> Runtime:
        target = self.target
        if isinstance(target, Runtime):
            return target
        await target.start()  # an App: starts its engines on first use
        return target.runtime

    async def call(
        self, prompt: str, parent_ids: Iterable[str] | None = None, call_id: str | None = None, **gen: Any
    ) -> CallResult:
        """Submit one LLM call of this program and wait for its text.

        parent_ids: ids of earlier calls of this program whose output this call depends on (ATLAS
        critical paths); None = unknown (the call inherits the program's critical path), [] = a
        root call. call_id: defaults to "call-<n>". gen: max_tokens, temperature, stop, ignore_eos
        (True: decode exactly max_tokens tokens, e.g. to fix output lengths in benchmarks)."""
        if not isinstance(prompt, str) or not prompt:
            raise ValueError("Program.call: prompt must be a non-empty string")
        unknown = sorted(set(gen) - set(GEN_OPTIONS))
        if unknown:
            raise TypeError(
                f"Program.call: unknown generation option(s) {unknown}; use {', '.join(GEN_OPTIONS)}"
            )
        rt = await self._runtime()
        cid = call_id or f"call-{next(self._ids)}"
        parts = ([["system", self.system]] if self.system else []) + [["user", prompt]]
        self.calls += 1
        predicted = None if self.predictor is None else max(1, int(self.predictor(prompt)))
        outcome = await rt.submit_call(
            self.engine,
            llm_request(parts, True, gen),
            program=self.program_id,
            call_id=cid,
            parents=None if parent_ids is None else list(parent_ids),
            predicted_tokens=predicted,
        )
        return CallResult(outcome.result.get("text", ""), cid, outcome.result, outcome.instance)

    async def call_with_tools(
        self,
        prompt: str,
        tools: Mapping[str, Any],
        parent_ids: Iterable[str] | None = None,
        call_id: str | None = None,
        max_rounds: int = 4,
        handling: str = "auto",
        start: str | None = None,
        **gen: Any,
    ) -> CallResult:
        """One LLM call that may pause for tools (teola.api.tool_calls): the model writes
        `<tool>{"name", "arguments"}</tool>`, generation stops, `tools[name](**arguments)` (sync or
        async) runs, and the call continues with the result, up to `max_rounds` tool calls.

        handling: what the engine does with the call's KV during each tool call: "auto" (INFERCEPT's
        least waste, with the engine policy's per-tool duration estimates), "preserve", "discard" or
        "swap". The result's `.result["pauses"]` lists each tool call (tool, seconds, handling,
        cached prompt tokens of the segment that continued). Returns the text after the last tool.

        start: text the model's answer begins with, e.g. '<tool>{"name": "' for a model that does not
        write the tool syntax on its own (as the template "agent" component's `start`); it counts as
        part of the first segment's text."""
        if not isinstance(tools, Mapping) or not tools:
            raise ValueError("Program.call_with_tools: tools must be a non-empty mapping of name -> callable")
        if handling not in ("auto", *HANDLINGS):
            raise ValueError(
                f"Program.call_with_tools: handling must be 'auto' or one of {HANDLINGS}, got {handling!r}"
            )
        if not isinstance(max_rounds, int) or max_rounds < 0:
            raise ValueError(f"Program.call_with_tools: max_rounds must be an int >= 0, got {max_rounds!r}")
        unknown = sorted(set(gen) - set(GEN_OPTIONS))
        if unknown:
            raise TypeError(
                f"Program.call_with_tools: unknown generation option(s) {unknown}; "
                f"use {', '.join(GEN_OPTIONS)}"
            )
        if start is not None and not isinstance(start, str):
            raise TypeError(f"Program.call_with_tools: start must be a string, got {type(start).__name__}")
        rt = await self._runtime()
        cid = call_id or f"call-{next(self._ids)}"
        instruction = TOOL_INSTRUCTION.format(tools=", ".join(sorted(tools)))
        system = f"{self.system}\n\n{instruction}" if self.system else instruction
        self.calls += 1
        text, result, instance = await continue_with_tools(
            rt,
            self,
            cid,
            [["system", system], ["user", prompt]],
            tools,
            parent_ids,
            max_rounds,
            handling,
            gen,
            start,
        )
        return CallResult(text, cid, result, instance)

    async def end(self) -> None:
        """The program ended: the engine policies and balancers forget it (process table, pin)."""
        rt = self.target if isinstance(self.target, Runtime) else getattr(self.target, "runtime", None)
        if rt is not None:
            rt.end_program(self.program_id)
