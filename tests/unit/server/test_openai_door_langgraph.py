"""A LangGraph agent (langchain-openai's ChatOpenAI) talking to teola's OpenAI-compatible door: its
two steps form one program, and the second step's declared parent reaches the ATLAS policy; and
LangGraph's prebuilt tool-calling agent runs its loop over two tools through the door."""

from __future__ import annotations

from typing import TypedDict

import pytest
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph

from tests.unit.server.test_openai_door import serve


class Trip(TypedDict, total=False):
    question: str
    plan: str
    answer: str


def agent(http) -> object:
    """plan -> answer; each node's model names the program, the call and (for answer) its parent."""

    def model(headers: dict[str, str]) -> ChatOpenAI:
        return ChatOpenAI(
            model="agent",
            base_url="http://teola.test/v1",
            api_key="none",
            max_tokens=8,
            temperature=0,
            http_async_client=http,
            default_headers={"x-teola-program": "lg", **headers},
        )

    planner = model({"x-teola-call": "plan", "x-teola-parent": ""})
    writer = model({"x-teola-call": "answer", "x-teola-parent": "plan"})

    async def plan(state: Trip) -> Trip:
        return {"plan": (await planner.ainvoke(f"Plan: {state['question']}")).content}

    async def answer(state: Trip) -> Trip:
        return {"answer": (await writer.ainvoke(f"Follow the plan: {state['plan']}")).content}

    graph = StateGraph(Trip)
    graph.add_node("plan", plan)
    graph.add_node("answer", answer)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "answer")
    graph.add_edge("answer", END)
    return graph.compile()


async def test_langgraph_agent_steps_are_one_program_under_atlas():
    async with serve() as (http, app, llm):
        table = app.runtime.schedulers["llm"].policy.table
        state = await agent(http).ainvoke({"question": "A day in Paris?"})
        assert state["plan"] and state["answer"]
        entry = table.get("default/lg")
        assert entry is not None and entry.completed == 2
        tokens = [
            (await llm.engine.execute("decoding", [dict(r)]))[0]["num_output_tokens"] for r in llm.requests
        ]
        assert entry.service == entry.critical_path == sum(tokens)  # answer hangs off plan: one path
        assert [r["priority"] for r in llm.requests][0] == 0 and llm.requests[1]["priority"] >= 1
        assert llm.requests[1]["parts"][-1][1].startswith("Follow the plan:")


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")  # the API issue 59 names
async def test_langgraph_react_agent_uses_two_tools_through_the_door():
    """LangGraph's prebuilt tool-calling agent: the model (a simulated one that calls each offered
    tool once, tests/support/tool_sim.py) gets both tools' results back and answers with them."""
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    from tests.support.tool_sim import ToolCallingSim

    @tool
    def weather(query: str) -> str:
        """The weather for a question."""
        return "sunny"

    @tool
    def population(query: str) -> str:
        """The population for a question."""
        return "2.1 million"

    async with serve(engine=ToolCallingSim("llm")) as (http, _, llm):
        model = ChatOpenAI(
            model="agent",
            base_url="http://teola.test/v1",
            api_key="none",
            temperature=0,
            http_async_client=http,
            max_retries=0,
        )
        agent = create_react_agent(model, [weather, population])
        state = await agent.ainvoke({"messages": [("user", "Paris?")]})
        kinds = [type(m).__name__ for m in state["messages"]]
        assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "ToolMessage", "AIMessage"]
        assert [m.name for m in state["messages"] if type(m).__name__ == "ToolMessage"] == [
            "weather",
            "population",
        ]
        assert state["messages"][-1].content == "From the tools: sunny; 2.1 million"
        assert [t["function"]["name"] for t in llm.requests[0]["tools"]] == ["weather", "population"]
        assert [m["role"] for m in llm.requests[-1]["messages"]] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
        ]
