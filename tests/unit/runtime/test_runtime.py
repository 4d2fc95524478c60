"""The two-tier runtime through App, on deterministic simulated engines (engines/sim/sim_engine.py)."""

import asyncio

import pytest

from apps.advanced_rag import set_template
from engines.sim.sim_engine import SimEngine, sim_engines
from teola import App, Engine, Node
from teola.runtime import QueryCancelled, QueryError, QueryTimeout
from tests.support.waiting import until

ALL_PASSES_OFF = {
    "passes": {
        "prune_covered_searches": False,
        "prune_dependencies": False,
        "stage_decomposition": False,
        "prefill_split": False,
        "decode_pipelining": False,
    }
}
DOC = " ".join(f"paris is the capital of france fact{i} river seine museum louvre" for i in range(40))
QUERY = {"question": "what is the capital of france", "documents": [DOC]}


def make_rag(sims, top_k=4, runtime=None, **engine_kw):
    """Advanced RAG (Teola Fig. 2d) built from the real components, on the given backends."""
    app = App("rag", config={"runtime": runtime or {}})
    app.register_engine(Engine("llm", kind="vllm", **engine_kw.get("llm", {})), backend=sims["llm"])
    app.register_engine(
        Engine(
            "embedding", kind="sentence_transformers", max_efficient_batch=4, **engine_kw.get("embedding", {})
        ),
        backend=sims["embedding"],
    )
    app.register_engine(Engine("vectordb", kind="pgvector"), backend=sims["vectordb"])
    app.register_engine(Engine("reranker", kind="reranker"), backend=sims["reranker"])
    set_template(app, chunk_size=64, chunk_overlap=8, top_k=top_k, max_tokens=32)
    return app


def by_name(trace):
    return {t["primitive"]: t for t in trace}


async def test_result_shape_trace_and_metrics():
    sims = sim_engines()
    app = make_rag(sims)
    try:
        r = await app.run(QUERY)
        assert isinstance(r.output, str) and r.output.startswith("answer ")
        assert r.latency > 0 and r.query_id
        assert {t["status"] for t in r.trace} == {"ok"}
        for t in r.trace:
            assert {
                "primitive",
                "op",
                "engine",
                "queued",
                "started",
                "finished",
                "instance",
                "batch_id",
                "batch_size",
            } <= set(t)
            assert t["queued"] <= t["started"] <= t["finished"]
        llm = [
            t for t in r.trace if t["op"] == "prefilling"
        ]  # the synthesis prompt (prefill_split's gate keeps it whole)
        assert llm and all("num_cached_tokens" in t for t in llm)
        snap = app.runtime.metrics.snapshot()
        assert snap["completed"] == 1 and snap["primitives"] == len(r.trace)
        assert snap["prefix_cache"]["cached_tokens"] == sum(t["num_cached_tokens"] or 0 for t in llm)
        assert "teola_queries_total 1" in app.runtime.metrics.prometheus()
        assert all(n == 0 for n in snap["queue_lengths"].values())
        again = await app.run(QUERY)  # the same prompts again: the engine's prefix cache holds them
        hits = sum(t["num_cached_tokens"] or 0 for t in again.trace if t["op"] == "prefilling")
        assert (
            hits > 0
            and app.runtime.metrics.snapshot()["prefix_cache"]["cached_tokens"]
            > snap["prefix_cache"]["cached_tokens"]
        )
    finally:
        await app.stop()


async def test_return_values_hands_back_the_chunks_an_answer_used():
    sims = sim_engines()
    app = make_rag(sims)
    try:
        r = await app.run(QUERY, {"return_values": ["rerank.context", "no.such.key"]})
        assert list(r.values) == ["rerank.context"]
        context = r.values["rerank.context"]
        assert 1 <= len(context) <= 3 and all(isinstance(c, str) and c in DOC for c in context)
        assert (await app.run(QUERY)).values == {}
        with pytest.raises(TypeError, match="return_values"):
            await app.run(QUERY, {"return_values": "rerank.context"})
    finally:
        await app.stop()


async def test_independent_branches_overlap_in_time():
    sims = sim_engines(0.01)
    app = make_rag(sims)
    try:
        t = by_name((await app.run(QUERY)).trace)
        index, expand = t["indexing.embed[0:4]"], t["query_expansion.expand.decode[0]"]
        assert max(index["started"], expand["started"]) < min(index["finished"], expand["finished"])
    finally:
        await app.stop()


async def test_partial_decoding_releases_its_consumer_before_the_decode_ends():
    sims = sim_engines(0.002)
    sims["llm"] = SimEngine("llm", latency={1: 0.002}, token_latency=0.001)  # a long streaming decode
    app = make_rag(sims)
    try:
        t = by_name((await app.run(QUERY)).trace)
        last_item = t["query_expansion.expand.decode[2]"]
        first_consumer = t["query_embedding.embed[0:1]"]
        assert first_consumer["queued"] < last_item["finished"]
        assert t["query_expansion.expand.decode[0]"]["finished"] < last_item["finished"]
        assert t["query_expansion.expand.decode[0]"]["batch_id"] == last_item["batch_id"]  # one stream
    finally:
        await app.stop()


async def test_prefill_is_fused_into_its_decode_and_both_are_traced():
    sims = sim_engines()
    app = make_rag(sims)
    try:
        t = by_name((await app.run(QUERY)).trace)
        assert t["synthesis.call0.prefill"]["fused_into"] == "synthesis.call0.decode"
        assert t["synthesis.call0.decode"]["batch_id"] == t["synthesis.call0.prefill"]["batch_id"]
        r = await app.run(QUERY, {"prescheduling": False})
        t2 = by_name(r.trace)
        assert "fused_into" not in t2["synthesis.call0.prefill"]
        assert t2["synthesis.call0.decode"]["batch_id"] != t2["synthesis.call0.prefill"]["batch_id"]
    finally:
        await app.stop()


@pytest.mark.parametrize("policy", ["topology", "fifo", "po", "to"])
async def test_differential_optimized_vs_unoptimized(policy):
    outs = []
    for config in ({}, ALL_PASSES_OFF, {"prescheduling": False}):
        app = make_rag(sim_engines(), runtime={"policy": policy})
        try:
            results = await asyncio.gather(
                *(
                    app.run({**QUERY, "question": q}, config)
                    for q in ("what is the capital of france", "which river", "louvre?")
                )
            )
            outs.append([r.output for r in results])
        finally:
            await app.stop()
    assert outs[0] == outs[1] == outs[2]
    assert len(set(outs[0])) == 3


async def test_a_failing_primitive_fails_only_its_query():
    sims = sim_engines(0.002)
    sims["llm"] = SimEngine("llm", latency={1: 0.002}, fail_on="EXPLODE")
    app = make_rag(sims)
    try:
        good, bad = await asyncio.gather(
            app.run(QUERY), app.run({**QUERY, "question": "EXPLODE please"}), return_exceptions=True
        )
        assert isinstance(good.output, str)
        assert isinstance(bad, QueryError) and not isinstance(bad, (QueryCancelled, QueryTimeout))
        assert bad.engine == "llm" and bad.primitive and bad.primitive in str(bad) and "'llm'" in str(bad)
        assert "injected failure" in str(bad)
        await app.runtime.wait_idle()
        snap = app.runtime.metrics.snapshot()
        assert snap["failed"] == 1 and snap["completed"] == 1
        assert all(n == 0 for n in snap["queue_lengths"].values())
    finally:
        await app.stop()


async def test_cancel_drops_the_queued_primitives():
    sims = sim_engines()
    sims["llm"] = SimEngine("llm", latency={1: 0.05})
    app = make_rag(sims, runtime={"max_inflight": 1})
    await app.start()
    try:
        compiled = app.compile(QUERY)
        task = asyncio.ensure_future(app.runtime.run(compiled, {}))
        # the expansion is on the LLM; the partial prefills wait behind it
        await until(lambda: app.runtime.queue_lengths()["llm"] > 0)
        seen = len(sims["llm"].requests)
        assert app.runtime.cancel(compiled.query_id)
        with pytest.raises(QueryCancelled) as info:
            await task
        assert app.runtime.queue_lengths() == {"llm": 0, "embedding": 0, "vectordb": 0, "reranker": 0}
        assert any(t["status"] == "dropped" for t in info.value.trace)
        await app.runtime.wait_idle()
        assert len(sims["llm"].requests) == seen  # nothing of the cancelled query ran afterwards
        assert not app.runtime.cancel(compiled.query_id)
        assert app.runtime.metrics.cancelled == 1
    finally:
        await app.stop()


async def test_cancel_asks_the_engine_to_abort_the_running_requests_of_that_query_only():
    sims = sim_engines()
    sims["llm"] = SimEngine("llm", latency={1: 0.3, 8: 0.3}, serial=False)
    app = make_rag(sims, runtime={"max_inflight": 4})
    await app.start()
    try:
        doomed, other = app.compile(QUERY), app.compile(QUERY)
        tasks = [asyncio.ensure_future(app.runtime.run(c, {})) for c in (doomed, other)]
        await until(lambda: sims["llm"].busy() > 0)  # both queries' expansions run on the LLM now
        assert {r.get("owner") for r in sims["llm"].requests} == {doomed.query_id, other.query_id}
        assert app.runtime.cancel(doomed.query_id)
        with pytest.raises(QueryCancelled):
            await tasks[0]
        await until(lambda: sims["llm"].aborted)
        assert sims["llm"].aborted == [doomed.query_id]
        assert (await tasks[1]).output.startswith("answer ")  # the other query is untouched
        await app.runtime.wait_idle()
        assert app.runtime.metrics.aborted_requests >= 1
        assert "teola_aborted_requests_total" in app.runtime.metrics.prometheus()
    finally:
        await app.stop()


async def test_events_report_each_primitive_and_the_answer_tokens_as_they_decode():
    sims = sim_engines()
    app = make_rag(sims)
    events = []
    try:
        r = await app.execute(app.compile(QUERY), {}, on_event=events.append)
        tokens = [e for e in events if e["event"] == "token"]
        assert len(tokens) > 1 and "".join(e["text"] for e in tokens) == r.output
        assert {e["primitive"] for e in tokens} == {"synthesis.call0.decode"}
        ran = {t["primitive"] for t in r.trace if t["engine"] and t["status"] == "ok"}
        started = {e["primitive"] for e in events if e["event"] == "primitive" and e["status"] == "started"}
        finished = [e for e in events if e["event"] == "primitive" and e["status"] == "finished"]
        assert started == ran and {e["primitive"] for e in finished} >= ran
        assert events.index(tokens[-1]) < max(
            i for i, e in enumerate(events) if e.get("status") == "finished"
        )
        assert all(e["instance"] and e["batch_size"] >= 1 for e in events if e["event"] == "primitive")

        def broken(_):
            raise RuntimeError("listener bug")

        again = await app.execute(app.compile(QUERY), {}, on_event=broken)  # a bad listener fails nothing
        assert again.output == r.output
    finally:
        await app.stop()


async def test_task_cancellation_drops_queued_work():
    sims = sim_engines()
    sims["llm"] = SimEngine("llm", latency={1: 0.05})
    app = make_rag(sims, runtime={"max_inflight": 1})
    try:
        task = asyncio.ensure_future(app.run(QUERY))
        await until(lambda: sims["llm"].requests)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert all(n == 0 for n in app.runtime.queue_lengths().values())
        assert app.runtime.running() == []
    finally:
        await app.stop()


async def test_query_and_primitive_timeouts():
    sims = sim_engines()
    sims["llm"] = SimEngine("llm", latency={1: 0.2})
    app = make_rag(sims)
    try:
        with pytest.raises(QueryTimeout, match="config 'timeout'"):
            await app.run(QUERY, {"timeout": 0.05})
        with pytest.raises(QueryTimeout, match="primitive_timeout") as info:
            await app.run(QUERY, {"primitive_timeout": 0.05})
        assert info.value.engine == "llm"
        with pytest.raises(ValueError, match="timeout"):
            await app.run(QUERY, {"timeout": -1})
    finally:
        await app.stop()


async def test_generated_namespace_is_dropped_and_a_given_one_kept():
    sims = sim_engines()
    app = make_rag(sims)
    try:
        await app.run(QUERY)
        assert len(sims["vectordb"].dropped) == 1 and sims["vectordb"].store == {}
        await app.run(QUERY, {"namespace": "mine"})
        assert "mine" in sims["vectordb"].store and "mine" not in sims["vectordb"].dropped
    finally:
        await app.stop()


def make_judge_app(contains):
    app = App("cond")
    sim = SimEngine("llm")
    app.register_engine(Engine("llm", kind="vllm"), backend=sim)
    judge = Node("llm", engine="llm", name="judge", config={"parts": [["q", "$query.question"]]})
    cond = Node("condition", name="check", config={"contains": contains})
    follow = Node("llm", engine="llm", name="follow", config={"parts": [["prev", "$text"]]})
    merge = Node("aggregate", name="merge", config={"mode": "first"})
    judge >> cond >> follow >> merge
    judge >> merge
    app.update_template([judge, cond, follow, merge])
    return app, sim


async def test_condition_skips_the_branch():
    taken, sim_t = make_judge_app("answer")  # the sim's answers contain "answer"
    skipped, sim_s = make_judge_app("no such text")
    try:
        off = {"passes": {"speculative_call": False}}  # the follow-up waits for the verdict (no speculation)
        rt, rs = await taken.run({"question": "hi"}, off), await skipped.run({"question": "hi"}, off)
        st = {t["primitive"]: t["status"] for t in rs.trace}
        assert st["follow.call.decode"] == "skipped" and st["follow.call.prefill"] == "skipped"
        assert st["merge.merge"] == "ok"
        assert len(sim_s.requests) == 1 and len(sim_t.requests) == 2  # (judge, follow) fused calls
        judge = by_name(rs.trace)["judge.call.decode"]
        assert rs.output.startswith("answer") and rt.output != rs.output and judge["status"] == "ok"
        assert skipped.runtime.metrics.skipped == 2
    finally:
        await taken.stop()
        await skipped.stop()


async def test_tool_not_allowed_fails_with_a_clear_error():
    app = App("tools")
    llm = SimEngine("llm")
    tools = SimEngine("tools")
    app.register_engine(Engine("llm", kind="vllm"), backend=llm)
    app.register_engine(Engine("tools", kind="tool"), backend=tools)
    plan = Node(
        "llm", engine="llm", name="plan", config={"parts": [["q", "$query.question"]], "split": "list"}
    )
    call = Node("tool", engine="tools", name="call", config={"tools": ["calc"]})
    plan >> call
    app.update_template([plan, call])
    try:
        with pytest.raises(QueryError, match=r"call\.call.*tools.*not valid JSON") as info:
            await app.run({"question": "compute"})
        assert info.value.primitive == "call.call" and info.value.engine == "tools"
    finally:
        await app.stop()


async def test_unknown_policy_is_rejected():
    app = make_rag(sim_engines())
    try:
        with pytest.raises(ValueError, match=r"known policies: .*fifo.*po.*to.*topology"):
            await app.run(QUERY, {"policy": "lifo"})
    finally:
        await app.stop()


async def test_instances_share_the_load_and_engines_keep_their_own_policy():
    sims = sim_engines()
    emb = [SimEngine("embedding", latency={1: 0.005}), SimEngine("embedding", latency={1: 0.005})]
    sims["embedding"] = emb
    app = make_rag(sims, embedding={"instances": 2, "policy": "po"})
    try:
        await asyncio.gather(*(app.run(QUERY) for _ in range(3)))
        assert all(e.batches for e in emb)
        assert app.runtime.schedulers["embedding"].policy.name == "po"
        assert app.runtime.schedulers["llm"].policy.name == "topology"
    finally:
        await app.stop()


async def test_stream_with_no_items_still_runs_the_rest_of_the_graph():
    """A splittable plan that yields no item: its Partial Decodings finish empty, the tool stages
    have nothing to do, and the fused answer prefill + decode still run (regression: a stream
    member released twice ended the query early with no output)."""
    from apps import tool_agent

    for cfg in ({}, {"prescheduling": False}):
        app = tool_agent.build()
        app.backends["llm"] = SimEngine("llm", n_items=0)
        app.backends["tools"] = SimEngine("tools")
        try:
            r = await app.run({"question": "what is 2+2"}, cfg)
            assert isinstance(r.output, str) and r.output.startswith("answer ")
            assert {t["primitive"] for t in r.trace} >= {"answer.call.decode", "plan.call.decode[0]"}
            assert app.runtime.metrics.snapshot()["completed"] == 1
        finally:
            await app.stop()
