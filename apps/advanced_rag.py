"""Document QA with advanced RAG (Teola Fig. 2d): query expansion into 3 queries, indexing in
parallel, top-16 vector search per query, reranking to the best 3 chunks, compact synthesis (the
chunks packed into as few prompts as fit the context window, refining across prompts: one LLM call
when the 3 chunks fit). The expanded queries cannot change the reranked context when a document
of at most 16 chunks is all in the question's own top 16, or when the reranker is the offline
default (the cosine of the same MiniLM embeddings the question's own exact search ranked by): the
optimizer then drops the expansion (pass `prune_covered_searches`; turn it off per query to keep
it, or give the reranker a cross-encoder with `reranker={"model": ...}`)."""

from __future__ import annotations

from typing import Any

from apps._samples import EIFFEL_QUESTION, rag_sample
from teola import App, Engine, Node


def build(
    llm: dict[str, Any] | None = None,
    embedding: dict[str, Any] | None = None,
    vectordb: dict[str, Any] | None = None,
    reranker: dict[str, Any] | None = None,
) -> App:
    """The app on the embedded defaults; each engine's options can be overridden."""
    app = App("advanced_rag")
    app.register_engine(Engine("llm", **({"kind": "vllm", "model": "smollm2-135m-instruct"} | (llm or {}))))
    app.register_engine(
        Engine(
            "embedding",
            **({"kind": "sentence_transformers", "model": "all-minilm-l6-v2"} | (embedding or {})),
        )
    )
    app.register_engine(Engine("vectordb", kind="pgvector", **(vectordb or {})))
    app.register_engine(Engine("reranker", kind="reranker", **(reranker or {})))

    set_template(app)
    app.set_sample(rag_sample(EIFFEL_QUESTION, ("Eiffel Tower", "Gustave Eiffel", "Paris")))
    return app


def set_template(
    app: App,
    num_queries: int = 3,
    chunk_size: int = 256,
    chunk_overlap: int = 30,
    top_k: int = 16,
    top_n: int = 3,
    max_tokens: int = 96,
    mode: str = "compact",
) -> App:
    """Give `app` (with engines named llm, embedding, vectordb, reranker) the advanced-RAG template."""
    expand = Node("query_expansion", engine="llm", anno="splittable", config={"num_queries": num_queries})
    index = Node(
        "indexing",
        engine="embedding",
        anno="batchable",
        config={"chunk_size": chunk_size, "chunk_overlap": chunk_overlap},
    )
    ingest = Node("ingestion", engine="vectordb", anno="batchable")
    embed_q = Node("query_embedding", engine="embedding")
    search = Node("search", engine="vectordb", config={"top_k": top_k})
    rerank = Node("rerank", engine="reranker", config={"top_n": top_n})
    synth = Node("synthesis", engine="llm", config={"mode": mode, "max_tokens": max_tokens})
    index >> ingest >> search
    expand >> embed_q >> search >> rerank >> synth
    app.update_template([expand, index, ingest, embed_q, search, rerank, synth])
    return app


app = build
