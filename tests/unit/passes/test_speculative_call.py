"""The `speculative_call` pass and the runtime's handling of speculative LLM calls: the core call
of search-augmented generation starts while the judge decodes; "yes" gives the answer the query
had without the pass, "no" aborts the call in the engine and answers with the judge's text."""

import asyncio

import pytest

from engines.sim.sim_engine import SimEngine
from teola import App, Engine, Node
from teola.ir.ops import PrimOp
from teola.runtime import QueryError

URL = "http://127.0.0.1:9/search"  # never called: the engine has a backend


class Search:
    """A remote search that answers at once."""

    ops = frozenset({"searching"})

    def __init__(self) -> None:
        from engines.protocol import EngineProfile

        self.profile = EngineProfile(max_batch=1, max_efficient_batch=1, max_inflight=8)

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def health(self) -> bool:
        return True

    async def execute(self, op: str, requests: list[dict]) -> list:
        return [
            [{"text": "paris is the capital of france", "score": 1.0, "title": "Paris"}] for _ in requests
        ]


def make_app(contains: str, core_tokens: int = 1, fail_core: bool = False, judge_tokens: int = 1):
    """Judge -> condition(contains) -> web search -> core; the answer is the core's, else the judge's.
    The core decodes `core_tokens` tokens at 10 ms each, the judge `judge_tokens`."""
    app = App("sg")
    llm = SimEngine(
        "llm",
        latency={1: 0.01},
        token_latency=0.01,
        serial=False,
        fail_on="paris is the capital" if fail_core else None,
    )
    app.register_engine(Engine("llm", kind="vllm"), backend=llm)
    app.register_engine(Engine("search", kind="search", url=URL), backend=Search())
    judge = Node(
        "llm",
        name="judge",
        engine="llm",
        config={"parts": [["q", "$query.question"]], "max_tokens": judge_tokens},
    )
    cond = Node("condition", name="need", config={"contains": contains})
    web = Node("web_search", name="web", engine="search", config={"top_k": 1})
    core = Node(
        "llm",
        name="core",
        engine="llm",
        config={"parts": [["q", "$query.question"], ["c", "$context"]], "max_tokens": core_tokens},
    )
    merge = Node("aggregate", name="answer", config={"mode": "first"})
    judge >> cond >> web >> core
    [core, judge] >> merge
    app.update_template([judge, cond, web, core, merge])
    app.sim_llm = llm
    return app


YES, NO = "answer", "no such text"  # the sim LLM's answers contain "answer"
Q = {"question": "what is the capital of france"}
OFF = {"passes": {"speculative_call": False}}


def test_pass_moves_the_core_call_out_from_under_the_condition():
    g = make_app(YES).compile(Q).egraph
    g.lint()
    ps = {p.name: p for p in g}
    key = ps["need.test"].outputs[0]
    full, decode = ps["core.call.prefill.full"], ps["core.call.decode"]
    for p in (full, decode):
        assert p.args["speculate_on"] == key and "guard" not in p.args and key not in p.inputs
    gate = ps["core.call.decode.gate"]
    assert (
        gate.op is PrimOp.AGGREGATE and gate.args["guard"] == key and gate.inputs == (decode.outputs[0], key)
    )
    assert ps["answer.merge"].inputs == (gate.outputs[0], ps["judge.call.decode"].outputs[0])  # order kept


def direct_app(merge: bool) -> App:
    """Judge -> condition -> core, the core reading only the question; with `merge`, the answer is
    the core's text, else the judge's; without, the core's text is the query's answer itself."""
    app = App("direct")
    app.register_engine(Engine("llm", kind="vllm"), backend=SimEngine("llm"))
    judge = Node("llm", name="judge", engine="llm", config={"parts": [["q", "$query.question"]]})
    cond = Node("condition", name="need", config={"contains": "x"})
    core = Node("llm", name="core", engine="llm", config={"parts": [["q", "$query.question"]]})
    judge >> cond >> core
    nodes = [judge, cond, core]
    if merge:
        nodes.append(Node("aggregate", name="answer", config={"mode": "first"}))
        [core, judge] >> nodes[-1]
    app.update_template(nodes)
    return app


def test_pass_moves_a_call_right_behind_the_condition_whose_decode_is_guarded_too():
    app = direct_app(merge=True)
    assert app.compile(Q, OFF).egraph.find(PrimOp.DECODING)[1].args["guard"]  # decompose guards both
    g = app.compile(Q).egraph
    key = g.find(PrimOp.CONDITION)[0].outputs[0]
    for p in g:
        if p.component == "core" and p.op is not PrimOp.AGGREGATE:
            assert p.args["speculate_on"] == key and key not in p.inputs and "guard" not in p.args
            assert not g.nx.has_edge(g.find(PrimOp.CONDITION)[0].id, p.id)


def test_opted_out_call_keeps_its_guard():
    ps = {p.name: p for p in make_app(YES).compile(Q, OFF).egraph}
    full = ps["core.call.prefill.full"]
    assert full.args["guard"] in full.inputs and "speculate_on" not in full.args
    assert "core.call.decode.gate" not in ps


def test_call_whose_text_is_the_answer_is_not_moved():
    app = direct_app(merge=False)
    ps = {p.name: p for p in app.compile(Q).egraph}
    assert all("speculate_on" not in p.args for p in ps.values())


async def test_yes_answers_as_without_the_pass_and_the_core_starts_before_the_verdict():
    app = make_app(YES, core_tokens=5)
    try:
        r = await asyncio.wait_for(app.run(Q), 10)
        t = {x["primitive"]: x for x in r.trace}
        assert t["core.call.decode"]["started"] < t["need.test"]["finished"]
        assert t["core.call.decode"]["status"] == "ok" and t["core.call.decode.gate"]["status"] == "ok"
        off = await asyncio.wait_for(app.run(Q, OFF), 10)
        assert r.output == off.output and "paris" not in r.output
        core_prompts = [q for q in app.sim_llm.requests if "paris is the capital" in repr(q)]
        assert len(core_prompts) == 2  # one core call per query: nothing was run twice
        assert app.runtime.metrics.discarded == 0 and app.sim_llm.aborted == []
    finally:
        await app.stop()


async def test_no_aborts_the_running_call_and_answers_with_the_judge():
    app = make_app(NO, core_tokens=300)  # the core decodes for 3 s; the judge decides in ~20 ms
    try:
        r = await asyncio.wait_for(app.run(Q), 10)
        t = {x["primitive"]: x for x in r.trace}
        judge = await asyncio.wait_for(app.run(Q, OFF), 10)
        assert r.output == judge.output  # the judge's text, as without the pass
        assert t["core.call.decode"]["status"] == "discarded"
        assert t["core.call.decode.gate"]["status"] == "skipped"
        assert app.runtime.metrics.discarded >= 1 and app.runtime.metrics.failed == 0
        tags = [a for a in app.sim_llm.aborted if "core.call" in a]
        assert len(tags) == 1 and tags[0].startswith(f"{r.query_id}:")  # that call alone, by its tag
    finally:
        await app.stop()


async def test_yes_after_the_speculative_call_failed_fails_the_query_naming_it():
    app = make_app(YES, fail_core=True)
    try:
        with pytest.raises(QueryError, match=r"core\.call.*injected failure"):
            await asyncio.wait_for(app.run(Q), 10)
    finally:
        await app.stop()


async def test_no_after_the_speculative_call_failed_answers_with_the_judge():
    app = make_app(NO, fail_core=True)
    try:
        r = await asyncio.wait_for(app.run(Q), 10)
        assert r.output.startswith("answer") and app.runtime.metrics.failed == 0
    finally:
        await app.stop()


@pytest.mark.parametrize("contains", [YES, NO])
async def test_streamed_text_of_the_speculative_call_waits_for_the_verdict(contains):
    events: list[dict] = []
    app = make_app(contains, core_tokens=3, judge_tokens=30)  # the core ends before the verdict
    try:
        r = await asyncio.wait_for(app.execute(app.compile(Q), None, on_event=events.append), 10)
        core = [
            j
            for j, e in enumerate(events)
            if e.get("event") == "token" and e["primitive"].startswith("core.")
        ]
        if contains == YES:
            verdict = next(
                j
                for j, e in enumerate(events)
                if e.get("primitive") == "judge.call.decode" and e.get("status") == "finished"
            )
            assert core and min(core) > verdict  # held until the verdict, then sent whole
            assert "".join(events[j]["text"] for j in core) == r.output
        else:
            assert core == [] and r.output.startswith("answer")  # dropped with the call
    finally:
        await app.stop()


async def test_a_queued_prefix_warmup_is_dropped_once_its_call_is_otherwise_ready():
    """With one batch at a time on the LLM, the judge's long call runs while the core's prefix
    warm-up (Partial Prefilling) waits; the search lands meanwhile, so the core's prompt is ready:
    the warm-up leaves the queue instead of holding the call back (teola.runtime.graph_tier.warmups)."""
    app = make_app(YES, core_tokens=2, judge_tokens=30)
    await app.start(max_inflight={"llm": 1})
    try:
        r = await asyncio.wait_for(app.run(Q), 10)
        t = {x["primitive"]: x for x in r.trace}
        warm = t["core.call.prefill.partial0"]
        assert warm["status"] == "skipped" and warm["dropped"] and warm["batch_id"] is None
        assert app.runtime.metrics.dropped_warmups == 1
        assert t["core.call.decode"]["status"] == "ok"
        off = await asyncio.wait_for(app.run(Q, OFF), 10)
        assert r.output == off.output  # the answer does not depend on the warm-up
        assert [q for q in app.sim_llm.requests if q.get("complete") is False] == [], "no warm-up was sent"
    finally:
        await app.stop()
