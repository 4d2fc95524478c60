"""Document QA with naive RAG (Teola Fig. 2c): chunk 256 / overlap 30, embed, ingest, embed the
question, top-3 search, tree synthesis (LlamaIndex's tree_summarize: the chunks packed into as few
prompts as fit the model's context window, so three 256-token chunks take one LLM call)."""

from __future__ import annotations

from typing import Any

from apps._samples import EIFFEL_QUESTION, rag_sample
from teola import App, Engine, Node


def build(
    llm: dict[str, Any] | None = None,
    embedding: dict[str, Any] | None = None,
    vectordb: dict[str, Any] | None = None,
) -> App:
    app = App("naive_rag")
    app.register_engine(Engine("llm", **({"kind": "vllm", "model": "smollm2-135m-instruct"} | (llm or {}))))
    app.register_engine(
        Engine(
            "embedding",
            **({"kind": "sentence_transformers", "model": "all-minilm-l6-v2"} | (embedding or {})),
        )
    )
    app.register_engine(Engine("vectordb", kind="pgvector", **(vectordb or {})))

    index = Node(
        "indexing", engine="embedding", anno="batchable", config={"chunk_size": 256, "chunk_overlap": 30}
    )
    ingest = Node("ingestion", engine="vectordb", anno="batchable")
    embed_q = Node("query_embedding", engine="embedding")
    search = Node("search", engine="vectordb", config={"top_k": 3})
    synth = Node("synthesis", engine="llm", config={"mode": "tree", "max_tokens": 96})
    index >> ingest >> search
    embed_q >> search >> synth
    app.update_template([index, ingest, embed_q, search, synth])
    app.set_sample(rag_sample(EIFFEL_QUESTION, ("Eiffel Tower", "Gustave Eiffel")))
    return app


app = build
