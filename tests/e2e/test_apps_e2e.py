"""End to end: the HTTP server with the four built-in apps on the embedded defaults (vLLM on CPU with
SmolLM2-135M, MiniLM embeddings, embedded PostgreSQL + pgvector, Postgres full-text search, local
tools), started ONCE per session on 127.0.0.1 (tests.fixtures.e2e_server); one real query per app
over HTTP."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.fixtures.e2e_server import APPS
from tests.support.http import metric, sse
from tests.support.waiting import until

pytestmark = pytest.mark.engines


def sample(app: str) -> dict:
    from teola.server import resolve_app

    query, _ = resolve_app(app).sample()
    return query


async def query(client: httpx.AsyncClient, app: str, config: dict | None = None) -> dict:
    r = await client.post(f"/v1/apps/{app}/query", json={"query": sample(app), "config": config or {}})
    assert r.status_code == 200, f"{app}: HTTP {r.status_code}: {r.text}"
    return r.json()


async def test_ready(e2e_client):
    r = await e2e_client.get("/readyz")
    assert r.status_code == 200 and all(r.json()["apps"].values())


@pytest.mark.parametrize("app", APPS)
async def test_app_answers_with_trace(e2e_client, app):
    body = await query(e2e_client, app)
    output = body["output"]
    text = (
        output
        if isinstance(output, str)
        else " ".join(map(str, output.values()))
        if isinstance(output, dict)
        else ""
    )
    assert text.strip(), f"{app}: empty answer {output!r}"
    assert body["trace"] and all(t["status"] in ("ok", "skipped") for t in body["trace"])
    assert body["latency"] > 0


async def test_react_agent_pauses_for_its_tool_and_continues_from_the_prefix_cache(e2e_client):
    # its answer begins with an open tool call (apps/react_agent.py FIRST_CALL), so the first segment
    # always stops at a tool call; the continuing segment re-sends prompt + what was written + result
    trace = {t["primitive"]: t for t in (await query(e2e_client, "react_agent"))["trace"]}
    assert trace["agent.round0.tool"]["status"] == "ok" and trace["agent.seg1.decode"]["status"] == "ok"
    seg0, seg1 = trace["agent.seg0.decode"], trace["agent.seg1.decode"]
    assert seg1["num_prompt_tokens"] > seg0["num_prompt_tokens"] + seg0["num_output_tokens"]
    assert seg1["num_cached_tokens"] > 0


# the sample's 3 chunks are all in the question's own top 16, so by default the expansion is pruned
KEEP_EXPANSION = {"passes": {"prune_covered_searches": False}}


async def test_advanced_rag_trace_has_partial_prefill_and_decode(e2e_client):
    # with the costs fitted at start, the gates keep the synthesis's constant prefix whole and decide on
    # the expansion's decode by its readers' reported costs (the embedder's and the search's); off, both split
    ungated = {"gate": False}
    split = {"passes": {**KEEP_EXPANSION["passes"], "prefill_split": ungated, "decode_pipelining": ungated}}
    body = await query(e2e_client, "advanced_rag", split)
    ops = {t["op"] for t in body["trace"]}
    assert {"partial_prefilling", "partial_decoding"} <= ops, sorted(ops)


async def test_pruned_expansion_gives_the_same_answer_with_one_llm_call(e2e_client):
    full = await query(e2e_client, "advanced_rag", KEEP_EXPANSION)
    pruned = await query(e2e_client, "advanced_rag")
    assert any(t["primitive"].startswith("query_expansion.") for t in full["trace"])
    llm = [t for t in pruned["trace"] if t["engine"] == "llm" and t["status"] == "ok"]
    assert llm and all(t["primitive"].startswith("synthesis.") for t in llm), llm
    assert pruned["output"] == full["output"]  # greedy decoding over the same reranked chunks


async def test_large_document_same_answer_without_expansion_before_the_default_reranker(e2e_client):
    # more chunks than the search's top 16: the question's own search no longer holds every chunk,
    # but the default reranker ranks by the cosine that search used, so its top 3 come from it
    q = sample("advanced_rag")
    filler = [
        " ".join(
            f"Distractor {d} sentence {i}: the harbour of town {d} opened in year {1700 + i}."
            for i in range(60)
        )
        for d in range(12)
    ]
    q = q | {"documents": list(q["documents"]) + filler}

    async def ask(config: dict) -> dict:
        r = await e2e_client.post("/v1/apps/advanced_rag/query", json={"query": q, "config": config})
        assert r.status_code == 200, r.text
        return r.json()

    full, pruned = await ask(KEEP_EXPANSION), await ask({})
    assert any(t["primitive"].startswith("query_expansion.") for t in full["trace"])
    # the question's search and one per expanded query (3), whether or not the queries' searches are split
    assert sum(t["requests"] for t in full["trace"] if t["op"] == "searching") == 4
    assert [t["op"] for t in pruned["trace"] if t["op"] == "searching"] == ["searching"]
    llm = [t for t in pruned["trace"] if t["engine"] == "llm" and t["status"] == "ok"]
    assert llm and all(t["primitive"].startswith("synthesis.") for t in llm), llm
    assert pruned["output"] == full["output"]


async def test_metrics_count_real_queries(e2e_client):
    await query(e2e_client, "advanced_rag")  # this test's own query: it does not rely on earlier tests
    text = (await e2e_client.get("/metrics")).text
    assert 'teola_server_queries_total{app="advanced_rag"}' in text
    assert "teola_primitive_latency_seconds_count" in text


async def test_naive_rag_makes_one_llm_call_when_its_chunks_fit(e2e_client):
    body = await query(e2e_client, "naive_rag")
    llm = [t for t in body["trace"] if t["engine"] == "llm" and t["status"] == "ok"]
    assert [t["op"] for t in llm if t["op"] == "decoding"] == ["decoding"], llm
    assert all(t["primitive"].startswith("synthesis.") for t in llm), llm


# A long answer in one synthesis call (all chunks in one prompt): the answer decodes from the start,
# instead of after compact synthesis's earlier calls decoded 400 tokens each.
LONG_ANSWER = {
    "nodes": {
        "synthesis": {
            "ask": "Write a long, detailed essay of many paragraphs.",
            "max_tokens": 400,
            "pack_size": 8,
        }
    }
}


async def test_stream_sends_vllm_tokens_before_the_answer(e2e_client):
    body = {"query": sample("advanced_rag"), "stream": True}
    r = await e2e_client.post("/v1/apps/advanced_rag/query", json=body)
    assert r.status_code == 200
    events = sse(r.text)
    kinds = [k for k, _ in events]
    assert kinds[0] == "started" and kinds[-3:] == ["answer", "trace", "done"], kinds
    tokens = [d["text"] for k, d in events if k == "token"]
    assert len(tokens) > 1 and "".join(tokens) == events[-3][1]["text"]


async def test_a_client_that_hangs_up_mid_stream_aborts_its_vllm_request(e2e_client):
    metrics = lambda: e2e_client.get("/metrics")  # noqa: E731
    key = 'teola_runtime_aborted_requests_total{app="advanced_rag"}'
    before = metric((await metrics()).text, key)
    body = {"query": sample("advanced_rag"), "config": LONG_ANSWER, "stream": True}
    async with e2e_client.stream("POST", "/v1/apps/advanced_rag/query", json=body) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line == "event: token":
                break  # the answer is decoding: hang up now
    text = ""

    async def aborted() -> bool:
        nonlocal text
        text = (await metrics()).text
        return metric(text, key) > before

    await until(aborted, interval=0.1)
    assert metric(text, key) == before + 1, "the running synthesis decode was not aborted in vLLM"
    assert metric(text, 'teola_server_queries_cancelled_total{app="advanced_rag",reason="disconnect"}') >= 1
    assert (await e2e_client.get("/readyz")).status_code == 200
    await query(e2e_client, "advanced_rag")  # and the server goes on answering


async def test_killing_the_vllm_engine_mid_load_gives_503_then_the_server_recovers(e2e_client):
    """Kill the LLM's engine-core process while queries run: in-flight ones answer 503, /readyz
    says 503 naming the engine, the supervisor restarts it and the same server answers again."""
    import os
    import signal

    llm = e2e_client.teola_server.state.teola.apps["advanced_rag"].runtime.instances["llm"][0].handle
    pids = llm.process_ids()
    assert pids, "cannot find the vLLM engine-core process"
    body = {"query": sample("advanced_rag"), "config": LONG_ANSWER}
    inflight = [
        asyncio.ensure_future(e2e_client.post("/v1/apps/advanced_rag/query", json=body)) for _ in range(3)
    ]
    # until the synthesis decodes are on vLLM
    await until(lambda: any(i.inflight for i in llm_instances(e2e_client)), timeout=60, interval=0.05)
    await asyncio.sleep(1.0)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    answers = await asyncio.gather(*inflight)
    assert [r.status_code for r in answers] == [503] * 3, [r.text for r in answers]
    assert all(r.json()["error"] == "engine_unavailable" for r in answers)
    ready = await e2e_client.get("/readyz")
    assert ready.status_code == 503 and "advanced_rag.llm" in ready.json()["detail"], ready.text

    async def back() -> bool:
        return (await e2e_client.get("/readyz")).status_code == 200

    await until(back, timeout=120, interval=0.1)  # vLLM on CPU restarts in 15-40 s
    assert (await e2e_client.get("/readyz")).status_code == 200, "the LLM engine did not come back"
    assert set(llm.process_ids()).isdisjoint(pids)
    body = await query(e2e_client, "advanced_rag")
    assert body["output"].strip()


def llm_instances(client: httpx.AsyncClient) -> list:
    return client.teola_server.state.teola.apps["advanced_rag"].runtime.instances["llm"]
