"""sentence-transformers engines: the embedder and the reranker."""
