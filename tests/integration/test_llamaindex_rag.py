"""The LlamaIndex baseline (bench/baselines/llamaindex_rag.py) on the real engines, through the session
fixtures: it answers from the documents it ingested, uses our adapters for every step, drops its
namespace afterwards and never opens a network connection."""

from __future__ import annotations

import socket

import pytest

pytestmark = pytest.mark.engines

pytest.importorskip("llama_index.core", reason="the optional 'llamaindex' extra is not installed")

DOCUMENT = (
    "The Zorblat festival is held every autumn in the town of Quenwick, on the northern coast of "
    "Lormany. Fishermen race painted boats across the bay. The festival was first held in 1873."
)
FILLER = (
    "The common kestrel is a bird of prey in the falcon family. It hunts small mammals by hovering "
    "over open fields and then diving onto its prey."
)


@pytest.fixture
def no_network(monkeypatch):
    """Fail any Python-level TCP/UDP connect (the engines talk over Unix sockets and pipes)."""
    connect = socket.socket.connect

    def guarded(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise AssertionError(f"network connection attempted to {address!r}")
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


def _pipeline(app_module, backends, **overrides):
    from bench.baselines.llamaindex_rag import LlamaIndexRAG, RAGSpec

    return LlamaIndexRAG(backends, RAGSpec.from_template(app_module.build().nodes, overrides))


async def test_naive_rag_answers_from_its_document(llm_engine, embedding_engine, vector_store, no_network):
    import apps.naive_rag

    rag = _pipeline(
        apps.naive_rag,
        {"llm": llm_engine, "embedding": embedding_engine, "vectordb": vector_store},
        synthesis={"max_tokens": 32},
    )
    assert (rag.spec.mode, rag.spec.top_k, rag.spec.chunk_size) == ("tree", 3, 256)
    rows_before = await vector_store.count()
    answer = await rag.aquery("Where is the Zorblat festival held?", [FILLER, DOCUMENT])
    assert "quenwick" in answer.text.lower(), answer.text
    assert any("Zorblat" in s for s in answer.sources)
    ops = [(t["engine"], t["op"]) for t in answer.trace]
    assert ("vectordb", "ingestion") in ops and ("llm", "decoding") in ops
    assert await vector_store.count() == rows_before  # the query's namespace was dropped


async def test_advanced_rag_expands_reranks_and_refines(
    llm_engine, embedding_engine, vector_store, reranker_engine, no_network
):
    import apps.advanced_rag

    rag = _pipeline(
        apps.advanced_rag,
        {
            "llm": llm_engine,
            "embedding": embedding_engine,
            "vectordb": vector_store,
            "reranker": reranker_engine,
        },
        synthesis={"max_tokens": 16, "mode": "refine"},
    )
    assert (rag.spec.num_queries, rag.spec.top_k, rag.spec.top_n, rag.spec.mode) == (3, 16, 3, "refine")
    answer = await rag.aquery("When was the Zorblat festival first held?", [DOCUMENT, FILLER])
    assert answer.text.strip()
    ops = [t["op"] for t in answer.trace]
    assert ops.count("reranking") == 1
    # expansion, then one refine call per reranked chunk (2 chunks here)
    assert ops.count("decoding") == 3, answer.trace
    assert 2 <= ops.count("searching") <= 4  # the question and up to 3 expanded queries


async def test_settings_are_ours_and_sync_calls_are_refused(llm_engine, embedding_engine, vector_store):
    from llama_index.core import Settings

    import apps.naive_rag
    from bench.baselines.llamaindex_engines import EngineEmbedding, EngineLLM

    _pipeline(apps.naive_rag, {"llm": llm_engine, "embedding": embedding_engine, "vectordb": vector_store})
    assert isinstance(Settings.llm, EngineLLM) and isinstance(Settings.embed_model, EngineEmbedding)
    with pytest.raises(RuntimeError, match="async"):
        Settings.llm.complete("hello")


async def test_an_llm_behind_a_server_is_called_with_llamaindexs_openai_like(
    remote_llm, embedding_engine, vector_store, monkeypatch
):
    """With the LLM behind `vllm serve` (the remote adapter, engine kind "openai"), the baseline calls
    the server with LlamaIndex's own OpenAILike, never through teola's adapter; its calls are still
    logged per query with the server's token counts."""
    pytest.importorskip(
        "llama_index.llms.openai_like", reason="the optional 'llamaindex' extra is not installed"
    )
    from llama_index.core import Settings
    from llama_index.llms.openai_like import OpenAILike

    import apps.naive_rag

    async def not_the_adapter(op, requests):
        raise AssertionError(f"teola's remote adapter was called ({op})")

    monkeypatch.setattr(remote_llm, "execute", not_the_adapter)
    rag = _pipeline(
        apps.naive_rag,
        {"llm": remote_llm, "embedding": embedding_engine, "vectordb": vector_store},
        synthesis={"max_tokens": 32},
    )
    assert isinstance(Settings.llm, OpenAILike) and Settings.llm.api_base == f"{remote_llm.base_url}/v1"
    answer = await rag.aquery("Where is the Zorblat festival held?", [FILLER, DOCUMENT])
    assert answer.text.strip()
    calls = [t for t in answer.trace if t["engine"] == "llm"]
    assert calls and all(t["op"] == "decoding" and 0 < t["num_output_tokens"] <= 32 for t in calls), calls
    assert all(t["num_prompt_tokens"] > 0 for t in calls)
