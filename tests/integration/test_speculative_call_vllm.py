"""Pass `speculative_call` on the real vLLM engine: a call behind a condition starts with the
judge; "yes" answers with the call's text, "no" aborts the running call inside vLLM by its tag and
answers with the judge's text, and the engine serves the next query."""

import pytest

from teola import App, Engine, Node
from tests.support.borrowed import Borrowed
from tests.support.waiting import until

pytestmark = pytest.mark.engines

Q = {"question": "Tell me about the history of the city of York."}


def make_app(llm_engine, condition: dict, core_tokens: int) -> App:
    app = App("speculative_call_vllm")
    app.register_engine(
        Engine("llm", kind="vllm", model="smollm2-135m-instruct"), backend=Borrowed(llm_engine)
    )
    judge = Node(
        "llm",
        name="judge",
        engine="llm",
        config={
            "parts": [["instruction", "Answer yes or no."], ["question", "$query.question"]],
            "max_tokens": 1,
        },
    )
    cond = Node("condition", name="need", config=condition)
    core = Node(
        "llm",
        name="core",
        engine="llm",
        config={
            "parts": [["instruction", "Write a long, detailed essay."], ["question", "$query.question"]],
            "max_tokens": core_tokens,
        },
    )
    merge = Node("aggregate", name="answer", config={"mode": "first"})
    judge >> cond >> core
    [core, judge] >> merge
    app.update_template([judge, cond, core, merge])
    return app


async def test_no_aborts_the_running_call_in_vllm_and_answers_with_the_judge(llm_engine):
    app = make_app(llm_engine, {"contains": "zzqx never written"}, core_tokens=400)
    try:
        r = await app.run(Q, {"return_values": ["judge.text"]})
        t = {x["primitive"]: x for x in r.trace}
        assert r.output == r.values["judge.text"]
        assert t["core.call.decode"]["status"] == "discarded"
        await until(lambda: app.runtime.metrics.aborted_requests == 1, timeout=60)  # vLLM stopped that call
        await app.runtime.wait_idle()
        assert not llm_engine._owned, "no request of the query is left registered in the engine"
        again = await app.run(Q, {"return_values": ["judge.text"]})
        assert again.output == again.values["judge.text"]
    finally:
        await app.stop()


async def test_yes_answers_with_the_call_that_started_before_the_verdict(llm_engine):
    app = make_app(llm_engine, {"not_contains": "zzqx never written"}, core_tokens=8)
    try:
        r = await app.run(Q, {"return_values": ["core.text"]})
        t = {x["primitive"]: x for x in r.trace}
        assert r.output == r.values["core.text"] and r.output
        assert t["core.call.decode"]["started"] < t["need.test"]["finished"]
        assert t["core.call.decode"]["status"] == "ok" and app.runtime.metrics.aborted_requests == 0
    finally:
        await app.stop()
