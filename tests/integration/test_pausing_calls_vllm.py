"""A call that pauses for a tool, on the real vLLM engine: the continuing segment's prompt is the
original prompt + what the model wrote + the tool's result (token counts add up), it reuses the
first segment's KV through the prefix cache. Program.call_with_tools end to end with a real tool."""

import pytest

from teola import Engine
from teola.api.program import Program
from teola.runtime import Runtime
from tests.support.borrowed import Borrowed

pytestmark = pytest.mark.engines

PARTS = [
    ["system", "You are a careful assistant."],
    [
        "user",
        "Count the apples: the basket holds 17 crates of 23 apples each, and "
        + " ".join(f"shelf {i} holds {i * 7 % 13} pears;" for i in range(40)),
    ],
]


async def test_a_continued_call_sends_prompt_plus_continuation_and_hits_the_prefix_cache(llm_engine):
    [first] = await llm_engine.execute(
        "decoding",
        [{"parts": PARTS, "max_tokens": 12, "ignore_eos": True, "pause_kv": "preserve", "kv_key": "p/c"}],
    )
    tool_result = "\n<result>391</result>\n"
    cont = [first["output_token_ids"], tool_result]
    [second] = await llm_engine.execute(
        "decoding", [{"parts": PARTS, "max_tokens": 8, "continuation": cont, "kv_key": "p/c"}]
    )
    added = len(llm_engine.renderer.tokenizer(tool_result, add_special_tokens=False)["input_ids"])
    assert second["num_prompt_tokens"] == first["num_prompt_tokens"] + 12 + added
    # everything up to the last full block of the first segment's prompt + output comes from the cache
    assert second["num_cached_tokens"] >= first["num_prompt_tokens"] - 16


async def test_call_with_tools_runs_on_vllm_and_records_no_pause_when_the_model_calls_no_tool(llm_engine):
    calls = []

    def calculator(expression: str) -> str:
        calls.append(expression)
        return "391"

    rt = Runtime({"llm": Engine("llm", kind="vllm")}, {"llm": Borrowed(llm_engine)}, policy="lamps")
    await rt.start()
    try:
        async with Program(rt, "agent") as prog:
            res = await prog.call_with_tools(
                "What is 17 times 23?", {"calculator": calculator}, max_tokens=24
            )
    finally:
        await rt.stop()
    # SmolLM2-135M does not write the tool syntax unprompted (measured); whatever it writes, the
    # pauses recorded match the tool calls made, and the transcript holds the final text
    assert len(res.result["pauses"]) == len(calls)
    assert res.result["transcript"].endswith(str(res)) and res.result["num_output_tokens"] >= 1
