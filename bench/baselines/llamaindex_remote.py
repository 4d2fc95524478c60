"""The LlamaIndex baselines of the remote-service apps, on the SAME engine adapter instances as teola.

- Search-augmented generation (apps/search_generation.py, Teola Fig. 2a): a LlamaIndex `Workflow`
  (llama-index-core's async event-driven steps): `judge` (LLM call) -> `route` (the app's condition:
  no "SEARCH: NO" in the judge's text means search) -> `search` (a `FunctionTool` whose async
  function calls the remote search adapter, `acall`) -> `answer` (LLM call over the results); without
  a search the judge's text is the answer, as in the teola app.
- Tool agent (apps/tool_agent.py, Fig. 2b): SmolLM2-135M cannot drive LlamaIndex's agents (its
  `FunctionAgent` needs a function-calling model; its ReAct agent's output parser needs the
  Thought/Action format, which the model does not write), so this is an explicit pipeline with
  LlamaIndex classes: plan (one LLM call, the app's prompt) -> the JSON lines it wrote, each a
  `FunctionTool.acall` over the tool adapter, all concurrently (`asyncio.gather`) -> answer (LLM
  call over the results). The plan call stops as teola's planner does: its request carries the plan
  node's split ("jsonl") and `num_items` as the adapter's `max_items`, so the decode ends once that many
  JSON lines are complete (no stop texts, as in the template). Plan lines are parsed as teola parses them
  (engines.llm_text.split_parser, first `max_calls` items; a line that is JSON but not a tool call fails
  the query, as in teola).

The LLM is bench.baselines.llamaindex_engines.EngineLLM (one "decoding" request per call, the prompt's system
part + user parts exactly as the teola template's parts); every engine call is logged per query
(CallLog) like teola's trace. The prompt texts, max_tokens and tool results' rendering (teola's
`texts_of`, blank-line joined) are the teola app's, read from its template nodes.
"""

from __future__ import annotations

import asyncio
import json
import time
import warnings
from dataclasses import dataclass
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.tools import FunctionTool
    from llama_index.core.workflow import Event, StartEvent, StopEvent, Workflow, step

from bench.baselines.llamaindex_engines import CallLog, EngineClient, EngineLLM
from bench.baselines.llamaindex_rag import Answer
from engines.llm_text.split_parser import SplitParser
from teola.runtime.requests import texts_of


@dataclass(slots=True)
class LLMCall:
    """One LLM node of a teola template: its instruction (system part), the literal parts between
    it and the question (e.g. worked examples), max_tokens, and for a split output its split and the
    items it asks for (teola's request stops the decode once `max_items` items are out)."""

    instruction: str
    max_tokens: int
    literals: tuple[str, ...] = ()
    split: str | None = None
    max_items: int | None = None

    def messages(self, question: str, *rest: str) -> list[ChatMessage]:
        return messages(self.instruction, *self.literals, question, *rest)

    def stop_rule(self) -> dict[str, Any]:
        """The request fields that end this call's decode where teola's does (none for a plain call)."""
        return {"split": self.split, "max_items": self.max_items} if self.split else {}


def node_config(app: Any, name: str) -> dict[str, Any]:
    """The config of the teola app's node `name` (a clear error when there is none)."""
    node = next((n for n in app.nodes if n.name == name), None)
    if node is None:
        raise ValueError(f"app {app.name!r} has no node {name!r}")
    return node.config


def node_call(app: Any, name: str) -> LLMCall:
    """The prompt layout and max_tokens of the teola app's LLM node `name`: instruction, literal
    parts, then the question and the parts that follow it."""
    node = next((n for n in app.nodes if n.name == name), None)
    if node is None:
        raise ValueError(f"app {app.name!r} has no node {name!r}")
    parts = node.config["parts"]
    if parts[0][0] != "instruction":
        raise ValueError(f"node {name!r}: the first prompt part must be the instruction")
    names = [p[0] for p in parts]
    if "question" not in names or any(str(p[1]).startswith("$") for p in parts[1 : names.index("question")]):
        raise ValueError(f"node {name!r}: expected instruction, literal parts, then the question")
    literals = tuple(str(p[1]) for p in parts[1 : names.index("question")])
    split = node.config.get("split")
    max_items = int(node.config.get("num_items", 4)) if split else None  # decompose_llm's default
    return LLMCall(parts[0][1], int(node.config.get("max_tokens", 128)), literals, split, max_items)


def messages(instruction: str, *user: str) -> list[ChatMessage]:
    return [ChatMessage(role=MessageRole.SYSTEM, content=instruction)] + [
        ChatMessage(role=MessageRole.USER, content=u) for u in user
    ]


def render(value: Any) -> str:
    """A tool's or search's results as teola renders them into a prompt part."""
    return "\n\n".join(texts_of(value))


def backends_of(app: Any) -> dict[str, Any]:
    """The started teola app's engine adapters (instance 0 of each engine)."""
    if app.runtime is None:
        raise ValueError(f"app {app.name!r} is not started: await app.start() first")
    return {name: insts[0].handle for name, insts in app.runtime.instances.items() if insts}


# ---- search-augmented generation -----------------------------------------------------------------
class Judged(Event):
    question: str
    judge: str


class Searched(Event):
    question: str
    results: list


class SearchGenerationWorkflow(Workflow):
    """judge -> route -> search -> answer, as LlamaIndex workflow steps."""

    def __init__(
        self,
        llm: EngineLLM,
        judge: LLMCall,
        core: LLMCall,
        search: FunctionTool,
        no_search_marker: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.llm, self.judge_call, self.core_call, self.search_tool = llm, judge, core, search
        self.marker = no_search_marker.lower()

    @step
    async def judge(self, ev: StartEvent) -> Judged:
        r = await self.llm.achat(self.judge_call.messages(ev.question), max_tokens=self.judge_call.max_tokens)
        return Judged(question=ev.question, judge=r.message.content or "")

    @step
    async def route(self, ev: Judged) -> Searched | StopEvent:
        if self.marker in ev.judge.lower():
            return StopEvent(result=ev.judge)
        out = await self.search_tool.acall(query=ev.question)
        return Searched(question=ev.question, results=out.raw_output)

    @step
    async def answer(self, ev: Searched) -> StopEvent:
        r = await self.llm.achat(
            self.core_call.messages(ev.question, render(ev.results)), max_tokens=self.core_call.max_tokens
        )
        return StopEvent(result=r.message.content or "")


class LlamaIndexSearchGeneration:
    """The search_generation app in LlamaIndex over a started teola app's adapters."""

    def __init__(self, app: Any, timeout: float = 300.0) -> None:
        self.clients = {n: EngineClient(n, b) for n, b in backends_of(app).items()}
        self.judge, self.core = node_call(app, "judge"), node_call(app, "core")
        self.marker = node_config(app, "need_search")["not_contains"]
        self.top_k = int(node_config(app, "web_search").get("top_k", 4))
        self.timeout = timeout

    async def aquery(self, question: str) -> Answer:
        log = CallLog()
        llm_client = self.clients["llm"].with_log(log)
        search_client = self.clients["search"].with_log(log)

        async def web_search(query: str) -> list:
            """Search the web for `query`; the top results."""
            [hits] = await search_client.execute("searching", [{"query": query, "top_k": self.top_k}])
            return hits

        tool = FunctionTool.from_defaults(async_fn=web_search, name="web_search")
        wf = SearchGenerationWorkflow(
            EngineLLM(llm_client), self.judge, self.core, tool, self.marker, timeout=self.timeout
        )
        text = await wf.run(question=question)
        return Answer(str(text), [], log.entries, time.perf_counter() - log.t0)


# ---- tool agent ----------------------------------------------------------------------------------
def plan_calls(text: str, max_calls: int | None, allowed: list[str]) -> list[dict[str, Any]]:
    """The tool calls of a plan output, parsed as teola parses them (see the module docstring)."""
    parser = SplitParser("jsonl")
    items = parser.feed(text) + parser.finish()
    calls = []
    for item in items[:max_calls]:
        call = json.loads(item)
        if (
            not isinstance(call, dict)
            or not isinstance(call.get("tool"), str)
            or not isinstance(call.get("args", {}), dict)
        ):
            raise ValueError(f'a tool call must be {{"tool": name, "args": {{...}}}}, got {item!r}')
        if allowed and call["tool"] not in allowed:
            raise ValueError(f"tool {call['tool']!r} is not allowed here; allowed tools: {allowed}")
        calls.append({"tool": call["tool"], "args": call.get("args", {})})
    return calls


class LlamaIndexToolAgent:
    """The tool_agent app as plan -> FunctionTools concurrently -> answer, with LlamaIndex classes."""

    def __init__(self, app: Any) -> None:
        self.clients = {n: EngineClient(n, b) for n, b in backends_of(app).items()}
        self.plan, self.answer = node_call(app, "plan"), node_call(app, "answer")
        self.max_calls = self.plan.max_items
        self.allowed = list(node_config(app, "tools").get("tools", []))

    def _tools(self, client: EngineClient) -> dict[str, FunctionTool]:
        def make(name: str) -> FunctionTool:
            async def call(**args: Any) -> Any:
                [result] = await client.execute("tool", [{"tool": name, "args": args}])
                return result

            return FunctionTool.from_defaults(async_fn=call, name=name, description=f"the {name} tool")

        return {name: make(name) for name in self.allowed}

    async def aquery(self, question: str) -> Answer:
        log = CallLog()
        llm = EngineLLM(self.clients["llm"].with_log(log))
        tools = self._tools(self.clients["tools"].with_log(log))
        r = await llm.achat(
            self.plan.messages(question), max_tokens=self.plan.max_tokens, **self.plan.stop_rule()
        )
        calls = plan_calls(r.message.content or "", self.max_calls, self.allowed)
        outputs = await asyncio.gather(*(tools[c["tool"]].acall(**c["args"]) for c in calls))
        results = [o.raw_output for o in outputs]
        a = await llm.achat(
            self.answer.messages(question, render(results)), max_tokens=self.answer.max_tokens
        )
        return Answer(a.message.content or "", [], log.entries, time.perf_counter() - log.t0)
