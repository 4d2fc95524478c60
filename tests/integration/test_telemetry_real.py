"""OpenTelemetry spans of a real advanced-RAG query (vLLM, MiniLM, pgvector, reranker), exported
by the real OpenTelemetry SDK to memory: one span per primitive, linked like the e-graph, GenAI
attributes on every LLM call, no prompt text by default."""

import pytest

import apps.advanced_rag
from tests.support.borrowed import Borrowed
from tests.support.otel import MemoryTelemetry, query_tree

pytestmark = pytest.mark.engines

GENAI_LLM = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.request.max_tokens",
    "gen_ai.request.temperature",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
)


async def test_advanced_rag_query_spans(llm_engine, embedding_engine, vector_store, reranker_engine):
    app = apps.advanced_rag.build()
    backends = {
        "llm": llm_engine,
        "embedding": embedding_engine,
        "vectordb": vector_store,
        "reranker": reranker_engine,
    }
    for name, backend in backends.items():
        app.register_engine(app.engines[name], backend=Borrowed(backend))  # the session's engines stay up
    mem = MemoryTelemetry()
    app.telemetry = mem.telemetry
    query, _ = app.sample()
    try:
        # the sample's 3 chunks would let the optimizer drop the expansion (and its partial decodes); the
        # gate decides on the expansion's decode by the engines' fitted costs, which vary with the load
        compiled = app.compile(
            query, {"passes": {"prune_covered_searches": False, "decode_pipelining": {"gate": False}}}
        )
        result = await app.execute(compiled)
    finally:
        await app.stop()
    root, kids = query_tree(mem.spans(), result.query_id)
    egraph = compiled.egraph
    assert set(kids) == {p.name for p in egraph.primitives}
    names = {s.context.span_id: n for n, s in kids.items()}
    for p in egraph.primitives:
        assert sorted(names[lk.context.span_id] for lk in kids[p.name].links) == sorted(
            q.name for q in egraph.parents(p)
        )
    llm = [s for s in kids.values() if s.attributes.get("teola.engine") == "llm"]
    assert llm and {s.attributes["teola.op"] for s in llm} >= {"prefilling", "partial_decoding"}
    for s in llm:
        missing = [k for k in GENAI_LLM if k not in s.attributes]
        assert not missing, (s.name, missing)
        assert (
            s.attributes["gen_ai.request.model"] == "smollm2-135m-instruct"
            and s.name == "chat smollm2-135m-instruct"
        )
    decodes = [s for s in llm if s.attributes["teola.op"] in ("decoding", "partial_decoding")]
    assert all(s.attributes["gen_ai.response.finish_reasons"][0] in ("stop", "length") for s in decodes)
    assert all(s.attributes["gen_ai.usage.output_tokens"] > 0 for s in decodes)
    embeds = [s for s in kids.values() if s.attributes["teola.op"] == "embedding"]
    assert embeds and all(s.attributes["gen_ai.operation.name"] == "embeddings" for s in embeds)
    assert all(
        s.attributes["teola.batch_size"] >= 1 for s in kids.values() if s.attributes.get("teola.engine")
    )
    question = query["question"]
    every_value = [str(v) for s in [root, *kids.values()] for v in s.attributes.values()]
    every_value += [str(v) for s in kids.values() for e in s.events for v in e.attributes.values()]
    assert not any(question in v or (result.output and result.output[:40] in v) for v in every_value)
