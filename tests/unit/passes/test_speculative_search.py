"""The `speculative_search` pass and the runtime's handling of speculative searches: a remote
search behind a condition starts with the judge; "no" discards it (the query does not wait for it,
its failure fails nothing); "yes" uses it (its failure fails the query)."""

import asyncio

import pytest

from engines.protocol import EngineProfile
from engines.sim.sim_engine import SimEngine
from teola import App, Engine, Node
from teola.ir.ops import PrimOp
from teola.runtime import QueryError
from tests.support.waiting import until

URL = "http://127.0.0.1:9/search"  # never called: the tests give the engine a backend


class HeldSearch:
    """A remote-search stand-in whose calls wait until `release` is set, then answer or fail."""

    ops = frozenset({"searching"})
    profile = EngineProfile(max_batch=1, max_efficient_batch=1, max_inflight=8)

    def __init__(self, fail: bool = False) -> None:
        self.release = asyncio.Event()
        self.fail = fail
        self.calls = 0
        self.landed = 0

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def health(self) -> bool:
        return True

    async def execute(self, op: str, requests: list[dict]) -> list:
        self.calls += len(requests)
        await self.release.wait()
        self.landed += 1
        if self.fail:
            raise RuntimeError("search API down")
        return [
            [{"text": "paris is the capital of france", "score": 1.0, "title": "Paris"}] for _ in requests
        ]


def make_app(search, contains: str, url: str | None = URL, llm_latency: float = 0.0):
    """Judge -> condition(contains) -> web search -> core; the answer is the core's, else the judge's."""
    app = App("sg")
    llm = SimEngine("llm", latency={1: llm_latency})
    app.register_engine(Engine("llm", kind="vllm"), backend=llm)
    app.register_engine(Engine("search", kind="search", **({"url": url} if url else {})), backend=search)
    judge = Node("llm", name="judge", engine="llm", config={"parts": [["q", "$query.question"]]})
    cond = Node("condition", name="need", config={"contains": contains})
    web = Node("web_search", name="web", engine="search", config={"top_k": 1})
    core = Node(
        "llm", name="core", engine="llm", config={"parts": [["q", "$query.question"], ["c", "$context"]]}
    )
    merge = Node("aggregate", name="answer", config={"mode": "first"})
    judge >> cond >> web >> core
    [core, judge] >> merge
    app.update_template([judge, cond, web, core, merge])
    app.sim_llm = llm  # what the tests inspect: the prompts the LLM received
    return app


YES, NO = "answer", "no such text"  # the sim LLM's answers contain "answer"
Q = {"question": "what is the capital of france"}


def prims(app, config=None):
    return {p.label: p for p in app.compile(Q, config).egraph}


ALONE = {"passes": {"speculative_call": False}}  # the search's pass alone: the core call keeps its guard


def test_pass_moves_the_guard_from_a_remote_search_to_its_readers():
    app = make_app(HeldSearch(), YES)
    ps = {p.op: p for p in app.compile(Q, ALONE).egraph}
    search = ps[PrimOp.SEARCHING]
    key = search.args["speculate_on"]
    assert "guard" not in search.args and key not in search.inputs and key.startswith("need.")
    full = ps[PrimOp.FULL_PREFILLING]
    assert full.args["guard"] == key and key in full.inputs
    assert ps[PrimOp.PARTIAL_PREFILLING].args.get("guard") is None  # the prefix still prefills early
    assert search.args["speculate_on"] in app.compile(Q, ALONE).egraph.to_text()


@pytest.mark.parametrize("config,url", [({"passes": {"speculative_search": False}}, URL), (None, None)])
def test_pass_leaves_local_searches_and_opted_out_queries_alone(config, url):
    app = make_app(HeldSearch(), YES, url=url)
    search = next(p for p in app.compile(Q, config).egraph if p.op is PrimOp.SEARCHING)
    assert "speculate_on" not in search.args and search.args["guard"] in search.inputs


async def test_yes_uses_the_search_that_started_with_the_judge():
    search = HeldSearch()
    app = make_app(search, YES, llm_latency=0.05)
    try:
        task = asyncio.ensure_future(app.run(Q))
        await until(lambda: search.calls == 1)  # asked before the judge has answered
        search.release.set()
        r = await asyncio.wait_for(task, 10)
        t = {x["primitive"]: x for x in r.trace}
        assert t["web.search"]["started"] < t["judge.call.decode"]["finished"]
        assert t["web.search"]["status"] == "ok" and t["core.call.decode"]["status"] == "ok"
        core = [req for req in app.sim_llm.requests if "paris is the capital" in repr(req)]
        assert core, "the core prompt carries the search result"
    finally:
        await app.stop()


async def test_opted_out_search_waits_for_the_judge():
    search = HeldSearch()
    search.release.set()
    app = make_app(search, YES, llm_latency=0.05)
    try:
        r = await app.run(Q, {"passes": {"speculative_search": False}})
        t = {x["primitive"]: x for x in r.trace}
        assert t["web.search"]["started"] >= t["judge.call.decode"]["finished"]
    finally:
        await app.stop()


@pytest.mark.parametrize("fail", [False, True])
async def test_no_discards_a_search_still_running_and_its_failure(fail):
    search = HeldSearch(fail=fail)
    app = make_app(search, NO)
    try:
        r = await asyncio.wait_for(app.run(Q, ALONE), 10)  # returns while the search is still held
        t = {x["primitive"]: x for x in r.trace}
        assert search.calls == 1 and search.landed == 0
        assert t["web.search"]["status"] == "discarded" and t["core.call.decode"]["status"] == "skipped"
        assert r.output.startswith("answer")  # the judge's text
        assert app.runtime.metrics.discarded == 1 and app.runtime.metrics.failed == 0
        search.release.set()
        await until(lambda: search.landed == 1)
        r2 = await asyncio.wait_for(app.run(Q, ALONE), 10)  # the late landing broke nothing
        assert r2.output == r.output
    finally:
        await app.stop()


async def test_yes_after_a_failed_speculative_search_fails_the_query_naming_it():
    search = HeldSearch(fail=True)
    search.release.set()
    app = make_app(search, YES, llm_latency=0.05)
    try:
        with pytest.raises(QueryError, match=r"web\.search.*search API down") as info:
            await app.run(Q)
        assert info.value.primitive == "web.search"
    finally:
        await app.stop()
