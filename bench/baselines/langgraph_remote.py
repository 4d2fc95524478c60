"""The LangGraph baselines of the remote-service apps, on the SAME engine adapter instances as teola.

The LLM is `EngineChatModel`, a thin LangChain chat model (`BaseChatModel`) whose every call is one
"decoding" request to teola's vLLM adapter (system message -> the system part, human messages ->
user parts: the same prompt the teola template renders). Searches and tools call the same search
and tool adapters. Graphs (langgraph `StateGraph`, run with `ainvoke`):

- search-augmented generation: START -> judge -> (conditional edge: no "SEARCH: NO" in the judge's
  text) -> search -> answer -> END, else judge -> END with the judge's text as the answer. The app
  has no independent branches to run in parallel (search needs the judge's verdict).
- tool agent: START -> plan -> one `Send` per tool call (LangGraph's map-reduce fan-out: the calls
  run as parallel branches in one super-step) -> answer (after all branches; results are reduced
  in plan order) -> END. The plan call stops as teola's planner does (the plan node's split and
  `num_items` as the request's `max_items`: the decode ends once that many JSON lines are complete);
  plan lines are parsed as teola parses them (bench.baselines.llamaindex_remote.plan_calls).
"""

from __future__ import annotations

import operator
import time
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from pydantic import ConfigDict

from bench.baselines.llamaindex_engines import CallLog, EngineClient
from bench.baselines.llamaindex_rag import Answer
from bench.baselines.llamaindex_remote import LLMCall, backends_of, node_call, node_config, plan_calls, render


class EngineChatModel(BaseChatModel):
    """A LangChain chat model over teola's LLM adapter (async only; greedy by default)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    client: Any
    max_tokens: int = 128
    temperature: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "teola-engine"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise RuntimeError(
            "EngineChatModel: use the async API (ainvoke); the adapters run on the caller's loop"
        )

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        parts = []
        for i, m in enumerate(messages):
            if isinstance(m, SystemMessage) and i == 0:
                parts.append(["system", str(m.content)])
            elif isinstance(m, HumanMessage):
                parts.append(["user", str(m.content)])
            else:
                raise ValueError(
                    f"EngineChatModel takes a system message then human messages, got "
                    f"{type(m).__name__} at position {i}"
                )
        request = {
            "parts": parts,
            "complete": True,
            "max_tokens": kwargs.get("max_tokens", self.max_tokens),
            "temperature": self.temperature,
            "stop": stop,
            "priority": 0,
            "split": kwargs.get("split"),
        }
        if kwargs.get("max_items"):  # a split call that ends once this many items are out
            request["max_items"] = kwargs["max_items"]
        (result,) = await self.client.execute("decoding", [request])
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=result["text"]))])


def _say(call: LLMCall, *user: str) -> list[BaseMessage]:
    """The call's instruction as the system message; its literal parts, then `user`, as human messages."""
    return [SystemMessage(call.instruction), *(HumanMessage(u) for u in (*call.literals, *user))]


# ---- search-augmented generation -----------------------------------------------------------------
class SearchState(TypedDict, total=False):
    question: str
    judge: str
    results: list
    answer: str


class LangGraphSearchGeneration:
    """The search_generation app as a LangGraph graph over a started teola app's adapters."""

    def __init__(self, app: Any) -> None:
        self.clients = {n: EngineClient(n, b) for n, b in backends_of(app).items()}
        self.judge, self.core = node_call(app, "judge"), node_call(app, "core")
        self.marker = node_config(app, "need_search")["not_contains"].lower()
        self.top_k = int(node_config(app, "web_search").get("top_k", 4))

    def graph(self, log: CallLog) -> Any:
        llm = EngineChatModel(client=self.clients["llm"].with_log(log))
        search = self.clients["search"].with_log(log)

        async def judge(s: SearchState) -> SearchState:
            m = await llm.ainvoke(_say(self.judge, s["question"]), max_tokens=self.judge.max_tokens)
            return {"judge": str(m.content)}

        def route(s: SearchState) -> str:
            return "stop" if self.marker in s["judge"].lower() else "search"

        async def do_search(s: SearchState) -> SearchState:
            [hits] = await search.execute("searching", [{"query": s["question"], "top_k": self.top_k}])
            return {"results": hits}

        async def answer(s: SearchState) -> SearchState:
            m = await llm.ainvoke(
                _say(self.core, s["question"], render(s["results"])), max_tokens=self.core.max_tokens
            )
            return {"answer": str(m.content)}

        g = StateGraph(SearchState)
        g.add_node("judge", judge)
        g.add_node("search", do_search)
        g.add_node("answer", answer)
        g.add_edge(START, "judge")
        g.add_conditional_edges("judge", route, {"search": "search", "stop": END})
        g.add_edge("search", "answer")
        g.add_edge("answer", END)
        return g.compile()

    async def aquery(self, question: str) -> Answer:
        log = CallLog()
        out = await self.graph(log).ainvoke({"question": question})
        text = out.get("answer", out.get("judge", ""))
        return Answer(text, [], log.entries, time.perf_counter() - log.t0)


# ---- tool agent ----------------------------------------------------------------------------------
class AgentState(TypedDict, total=False):
    question: str
    calls: list
    results: Annotated[list, operator.add]
    answer: str


class CallState(TypedDict):
    index: int
    call: dict


class LangGraphToolAgent:
    """The tool_agent app as plan -> parallel tool branches (Send) -> answer."""

    def __init__(self, app: Any) -> None:
        self.clients = {n: EngineClient(n, b) for n, b in backends_of(app).items()}
        self.plan, self.answer = node_call(app, "plan"), node_call(app, "answer")
        self.max_calls = self.plan.max_items
        self.allowed = list(node_config(app, "tools").get("tools", []))

    def graph(self, log: CallLog) -> Any:
        llm = EngineChatModel(client=self.clients["llm"].with_log(log))
        tools = self.clients["tools"].with_log(log)

        async def plan(s: AgentState) -> AgentState:
            m = await llm.ainvoke(
                _say(self.plan, s["question"]), max_tokens=self.plan.max_tokens, **self.plan.stop_rule()
            )
            return {"calls": plan_calls(str(m.content), self.max_calls, self.allowed)}

        def fan_out(s: AgentState) -> list[Send] | str:
            return [Send("tool", {"index": i, "call": c}) for i, c in enumerate(s["calls"])] or "answer"

        async def tool(c: CallState) -> AgentState:
            [result] = await tools.execute("tool", [c["call"]])
            return {"results": [(c["index"], result)]}

        async def answer(s: AgentState) -> AgentState:
            results = [r for _, r in sorted(s.get("results", []), key=lambda p: p[0])]
            m = await llm.ainvoke(
                _say(self.answer, s["question"], render(results)), max_tokens=self.answer.max_tokens
            )
            return {"answer": str(m.content)}

        g = StateGraph(AgentState)
        g.add_node("plan", plan)
        g.add_node("tool", tool)
        g.add_node("answer", answer)
        g.add_edge(START, "plan")
        g.add_conditional_edges("plan", fan_out, ["tool", "answer"])
        g.add_edge("tool", "answer")
        g.add_edge("answer", END)
        return g.compile()

    async def aquery(self, question: str) -> Answer:
        log = CallLog()
        out = await self.graph(log).ainvoke({"question": question, "results": []})
        return Answer(out.get("answer", ""), [], log.entries, time.perf_counter() - log.t0)
