"""A LangGraph agent (langchain-openai's ChatOpenAI) talking to teola's OpenAI-compatible door: its
two steps form one program, and the second step's declared parent reaches the ATLAS policy."""
from __future__ import annotations

from typing import TypedDict

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
        return ChatOpenAI(model="agent", base_url="http://teola.test/v1", api_key="none", max_tokens=8,
                          temperature=0, http_async_client=http, default_headers={"x-teola-program": "lg", **headers})

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
        tokens = [(await llm.engine.execute("decoding", [dict(r)]))[0]["num_output_tokens"] for r in llm.requests]
        assert entry.service == entry.critical_path == sum(tokens)  # answer hangs off plan: one path
        assert [r["priority"] for r in llm.requests][0] == 0 and llm.requests[1]["priority"] >= 1
        assert llm.requests[1]["parts"][-1][1].startswith("Follow the plan:")
