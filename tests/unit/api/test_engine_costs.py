"""Costs an engine reports when it starts reach compilation: the app's specs adopt them, the cache of
optimized graphs is cleared, and the cost-gated passes decide with them (recorded in the e-graph's
text)."""

import asyncio
import dataclasses

from apps import tool_agent
from engines.llm_text.costs import EngineCosts
from engines.sim.llm import IterationCost, SimLLM
from teola import Engine


def agent_with_costs(costs: EngineCosts | None):
    app = tool_agent.build()
    backend = SimLLM("llm", IterationCost(base=0.01, prefill_token=0.001, decode_seq=0.01), block_size=32)
    backend.profile.costs = costs.as_dict() if costs is not None else {}
    app.register_engine(Engine("llm", kind="vllm"), backend=backend)
    return app


def compiled_text(app) -> str:
    async def main() -> str:
        query = {"question": "What is 17 multiplied by 23?"}
        before = app.compile(query).egraph.to_text()
        await app.start()
        try:
            after = app.compile(query).egraph.to_text()
        finally:
            await app.stop()
        assert "# gate" not in before  # no engine started: no costs known yet
        return after

    return asyncio.run(main())


def test_started_engines_costs_gate_prefill_split_on_the_next_compile():
    costs = EngineCosts(request_s=0.05, prefill_token_s=0.003, decode_step_s=0.03, block_size=32, source="t")
    text = compiled_text(agent_with_costs(costs))
    # the answer's prefix (instruction + a short question) adds no whole KV block: the request is all cost
    assert "partial_prefilling" not in text
    assert "# gate prefill_split answer.call.prefill: kept whole, predicted gain -50 ms (t)" in text


def test_a_cheap_request_and_a_costly_prefill_make_the_same_prefix_split():
    costs = EngineCosts(request_s=0.0001, prefill_token_s=0.003, decode_step_s=0.03, block_size=8, source="t")
    text = compiled_text(agent_with_costs(costs))
    assert "answer.call.prefill.partial0" in text
    assert "# gate prefill_split answer.call.prefill: split, predicted gain +" in text


def test_without_reported_costs_compilation_is_as_before():
    text = compiled_text(agent_with_costs(None))
    assert (
        "# gate" not in text
        and "answer.call.prefill.partial0" in text
        and text.count("partial_decoding") == 2
    )


def test_the_planners_readers_are_tools_of_unknown_cost_so_it_stays_whole_however_slow_its_decode():
    free = EngineCosts(request_s=0.05, prefill_token_s=0.003, decode_step_s=0.0, block_size=32, source="t")
    slow = dataclasses.replace(free, decode_step_s=0.03)
    for costs in (free, slow):
        text = compiled_text(agent_with_costs(costs))
        # 96 tokens x 30 ms x 1/2 = 1.44 s of decode after the first item, but the work its readers
        # (tool calls) would overlap is unknown: no overlap is claimed
        assert "partial_decoding" not in text and "llm.decoding" in text
        assert (
            "# gate decode_pipelining plan.call.decode: kept whole, predicted gain +0 ms (t); "
            "no costs for tools.call"
        ) in text
