"""Document QA with advanced RAG (Teola Fig. 2d): query expansion into 3 queries, indexing in
parallel, top-16 vector search per query, reranking to the best 3 chunks, refine synthesis."""
from __future__ import annotations

from typing import Any

from teola import App, Engine, Node


def build(llm: dict[str, Any] | None = None, embedding: dict[str, Any] | None = None,
          vectordb: dict[str, Any] | None = None, reranker: dict[str, Any] | None = None) -> App:
    """The app on the embedded defaults; each engine's options can be overridden."""
    app = App("advanced_rag")
    app.register_engine(Engine("llm", kind="vllm", **({"model": "smollm2-135m-instruct"} | (llm or {}))))
    app.register_engine(Engine("embedding", kind="sentence_transformers",
                               **({"model": "all-minilm-l6-v2"} | (embedding or {}))))
    app.register_engine(Engine("vectordb", kind="pgvector", **(vectordb or {})))
    app.register_engine(Engine("reranker", kind="reranker", **(reranker or {})))

    expand = Node("query_expansion", engine="llm", anno="splittable", config={"num_queries": 3})
    index = Node("indexing", engine="embedding", anno="batchable", config={"chunk_size": 256, "chunk_overlap": 30})
    ingest = Node("ingestion", engine="vectordb", anno="batchable")
    embed_q = Node("query_embedding", engine="embedding")
    search = Node("search", engine="vectordb", config={"top_k": 16})
    rerank = Node("rerank", engine="reranker", config={"top_n": 3})
    synth = Node("synthesis", engine="llm", config={"mode": "refine", "max_tokens": 96})
    index >> ingest >> search
    expand >> embed_q >> search >> rerank >> synth
    app.update_template([expand, index, ingest, embed_q, search, rerank, synth])
    return app


app = build
