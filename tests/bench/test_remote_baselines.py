"""Wiring of the LlamaIndex and LangGraph baselines of bench.studies.remote.remote_apps: they read the teola
app's prompts, send the same prompt parts to the LLM adapter, call the search / tool adapters as the app
does, and parse plans as teola does. The LLM here is a scripted adapter (the real-engine run is
`python -m bench remote_apps --quick`); search and tools are real adapters."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from apps import search_generation, tool_agent
from bench.baselines.langgraph_remote import LangGraphSearchGeneration, LangGraphToolAgent
from bench.baselines.llamaindex_remote import LlamaIndexSearchGeneration, LlamaIndexToolAgent, plan_calls
from bench.studies.remote.remote_apps_setup import MAX_CALLS, PLAN_EXAMPLES, PLAN_INSTRUCTION, TOOL_NAMES
from teola.compile.components import prompts

PLAN = (
    'Sure.\n{"tool": "calculator", "args": {"expression": "2+3"}}\n'
    '{"tool": "convert_units", "args": {"value": 1, "from_unit": "h", "to_unit": "min"}}\n'
    '{"tool": "calculator", "args": {"expression": "9"}}'
)


class ScriptedLLM:
    """Answers each decoding request by its instruction; records the requests."""

    def __init__(self, judge: str = "Maybe Paris.\nSEARCH: YES") -> None:
        self.judge, self.requests = judge, []

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        assert op == "decoding"
        self.requests += requests
        system = requests[0]["parts"][0][1]
        text = (
            PLAN if system == PLAN_INSTRUCTION else self.judge if system == prompts.JUDGE else "final answer"
        )
        return [{"text": text, "num_prompt_tokens": 10, "num_output_tokens": 3, "num_cached_tokens": 0}]


class Search:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        assert op == "searching"
        self.requests += requests
        return [
            [{"text": f"hit {i} for {r['query']}", "score": 1.0, "title": ""} for i in range(r["top_k"])]
            for r in requests
        ]


def fake_started(app: Any, backends: dict[str, Any]) -> Any:
    """The teola app's template with the given adapters as its started engines."""
    instances = {name: [SimpleNamespace(handle=b)] for name, b in backends.items()}
    return SimpleNamespace(name=app.name, nodes=app.nodes, runtime=SimpleNamespace(instances=instances))


@pytest.mark.parametrize("cls", [LlamaIndexToolAgent, LangGraphToolAgent])
async def test_tool_agent_baselines_plan_call_tools_and_answer(cls):
    from engines.tools.tool_engine import ToolEngine

    app = tool_agent.build(
        tools={"defaults": True},
        tool_names=TOOL_NAMES,
        plan_instruction=PLAN_INSTRUCTION,
        plan_examples=PLAN_EXAMPLES,
    )
    llm, tools = ScriptedLLM(), ToolEngine("tools")
    await tools.start()
    try:
        ans = await cls(fake_started(app, {"llm": llm, "tools": tools})).aquery(
            "What is 2+3, and 1 h in min?"
        )
    finally:
        await tools.stop()
    assert ans.text == "final answer"
    plan, answer = llm.requests
    # the same parts as the teola template: instruction, the worked examples, the question
    assert plan["parts"] == [
        ["system", PLAN_INSTRUCTION],
        ["user", PLAN_EXAMPLES],
        ["user", "What is 2+3, and 1 h in min?"],
    ]
    assert plan["max_tokens"] == 96
    # the plan stops as teola's does: split into JSON lines, decode ends once max_calls lines are out
    assert plan["split"] == "jsonl" and plan["max_items"] == 2 and plan["stop"] is None
    assert answer["split"] is None and "max_items" not in answer
    # max_calls = 2: the third line is not called; results in plan order, rendered as teola renders them
    assert answer["parts"] == [
        ["system", prompts.TOOL_ANSWER],
        ["user", "What is 2+3, and 1 h in min?"],
        ["user", "5\n\n60.0"],
    ]
    assert [t["op"] for t in ans.trace] == ["decoding", "tool", "tool", "decoding"]


@pytest.mark.parametrize("cls", [LlamaIndexToolAgent, LangGraphToolAgent])
async def test_tool_agent_baselines_stop_the_plan_where_teolas_planner_stops(cls):
    """bench.studies.remote.remote_apps' workload asks for one call: the baselines' plan request ends the
    decode as teola's plan request does (same max_tokens, stop texts, split and max_items) and one tool
    runs."""
    from engines.tools.tool_engine import ToolEngine
    from teola.ir.ops import PrimOp
    from teola.runtime.requests import llm_request

    app = tool_agent.build(
        tools={"defaults": True},
        tool_names=TOOL_NAMES,
        max_calls=MAX_CALLS,
        plan_instruction=PLAN_INSTRUCTION,
        plan_examples=PLAN_EXAMPLES,
    )
    [decode] = [
        p
        for p in app.compile({"question": "q"}).egraph.primitives
        if p.component == "plan" and p.op in (PrimOp.DECODING, PrimOp.PARTIAL_DECODING)
    ]
    teola_plan = llm_request([], True, decode.args)
    llm, tools = ScriptedLLM(), ToolEngine("tools")
    await tools.start()
    try:
        ans = await cls(fake_started(app, {"llm": llm, "tools": tools})).aquery("What is 2+3?")
    finally:
        await tools.stop()
    plan = llm.requests[0]
    fields = ("max_tokens", "stop", "split", "max_items")
    assert {k: plan.get(k) for k in fields} == {k: teola_plan.get(k) for k in fields}
    assert plan["max_items"] == MAX_CALLS == 1
    assert [t["op"] for t in ans.trace] == ["decoding", "tool", "decoding"]


@pytest.mark.parametrize("cls", [LlamaIndexSearchGeneration, LangGraphSearchGeneration])
async def test_search_generation_baselines_search_when_the_judge_asks(cls):
    app = search_generation.build()
    llm, search = ScriptedLLM(), Search()
    ans = await cls(fake_started(app, {"llm": llm, "search": search})).aquery("Capital of France?")
    assert ans.text == "final answer"
    assert search.requests == [{"query": "Capital of France?", "top_k": 4}]
    judge, core = llm.requests
    assert (
        judge["parts"] == [["system", prompts.JUDGE], ["user", "Capital of France?"]]
        and judge["max_tokens"] == 64
    )
    context = "\n\n".join(f"hit {i} for Capital of France?" for i in range(4))
    assert core["parts"] == [
        ["system", prompts.SEARCH_ANSWER],
        ["user", "Capital of France?"],
        ["user", context],
    ]


@pytest.mark.parametrize("cls", [LlamaIndexSearchGeneration, LangGraphSearchGeneration])
async def test_search_generation_baselines_answer_with_the_judge_without_search(cls):
    app = search_generation.build()
    llm, search = ScriptedLLM(judge="Paris.\nsearch: no"), Search()
    ans = await cls(fake_started(app, {"llm": llm, "search": search})).aquery("Capital of France?")
    assert ans.text == "Paris.\nsearch: no" and search.requests == [] and len(llm.requests) == 1


def test_plan_calls_parse_as_teola_does():
    assert plan_calls(PLAN, 2, list(TOOL_NAMES)) == [
        {"tool": "calculator", "args": {"expression": "2+3"}},
        {"tool": "convert_units", "args": {"value": 1, "from_unit": "h", "to_unit": "min"}},
    ]
    assert plan_calls("I cannot help with that.", 2, []) == []
    with pytest.raises(ValueError, match="must be"):
        plan_calls("[1, 2]\n", 2, [])
    with pytest.raises(ValueError, match="not allowed"):
        plan_calls('{"tool": "shell", "args": {}}', 2, ["calculator"])


def test_the_paper_baselines_run_on_teolas_runtime_with_their_passes_and_policy(monkeypatch):
    import asyncio

    import bench.studies.remote.remote_apps as ra
    from bench.studies.rag.rag_setup import SYSTEMS as RAG

    seen = []

    async def fake(app, q, config, policy, arrival, index):
        seen.append((config, policy))
        return {"ok": True}

    monkeypatch.setattr(ra, "run_query", fake)
    for system in ("teola", "LlamaDist-PO", "LlamaDistPC-TO"):
        asyncio.run(ra._trace(system, None, None, [{"question": "q"}], None, 0))
    assert seen == [({}, "topology"), (RAG["LlamaDist-PO"][0], "po"), (RAG["LlamaDistPC-TO"][0], "to")]


def test_remote_apps_names_the_systems_it_knows(capsys):
    from bench.__main__ import main

    with pytest.raises(SystemExit):
        main(["remote_apps", "--systems", "teola,LlamaDist-XX", "--no-write"])
    err = capsys.readouterr().err
    assert "unknown system(s) ['LlamaDist-XX']" in err and "LlamaDistPC-TO" in err
