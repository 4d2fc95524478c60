"""The LangGraph baseline of the remote-LLM document-QA benchmark (bench/baselines/langgraph_rag.py) on the
real engines: ChatOpenAI against a real `vllm serve`, teola's embedder, pgvector and reranker adapters. It
answers from the document it ingested, makes the expansion and synthesis calls with the server's token
counts, drops its namespace afterwards, and refuses a synthesis mode it does not write."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.engines

DOCUMENT = (
    "The Zorblat festival is held every autumn in the town of Quenwick, on the northern coast of "
    "Lormany. Fishermen race painted boats across the bay. The festival was first held in 1873."
)
FILLER = (
    "The common kestrel is a bird of prey in the falcon family. It hunts small mammals by hovering "
    "over open fields and then diving onto its prey."
)


async def test_advanced_rag_expands_retrieves_reranks_and_answers(
    vllm_server, embedding_engine, vector_store, reranker_engine
):
    import apps.advanced_rag
    from bench.baselines.langgraph_rag import LangGraphRAG
    from bench.baselines.llamaindex_rag import RAGSpec
    from tests.fixtures.vllm_server import SERVED_NAME

    spec = RAGSpec.from_template(apps.advanced_rag.build().nodes, {"synthesis": {"max_tokens": 32}})
    backends = {"embedding": embedding_engine, "vectordb": vector_store, "reranker": reranker_engine}
    rag = LangGraphRAG(backends, spec, f"{vllm_server}/v1", SERVED_NAME)
    rows_before = await vector_store.count()
    answer = await rag.aquery("Where is the Zorblat festival held?", [FILLER, DOCUMENT])
    assert "quenwick" in answer.text.lower(), answer.text
    assert len(answer.sources) == 2 and any("Zorblat" in s for s in answer.sources)  # both chunks (top_n 3)
    ops = [(t["engine"], t["op"]) for t in answer.trace]
    assert ops.count(("llm", "decoding")) == 2 and ("reranker", "reranking") in ops
    assert ops.count(("vectordb", "searching")) >= 2  # the question and at least one expanded query
    calls = [t for t in answer.trace if t["op"] == "decoding"]
    assert all(t["num_prompt_tokens"] > 0 and t["num_output_tokens"] > 0 for t in calls)
    assert await vector_store.count() == rows_before  # the query's namespace was dropped

    spec.mode = "refine"
    with pytest.raises(ValueError, match="compact synthesis only"):
        LangGraphRAG(backends, spec, f"{vllm_server}/v1", SERVED_NAME)
