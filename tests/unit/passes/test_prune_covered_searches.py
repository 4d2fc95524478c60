"""Covered-search pruning: when the question's own search returns every chunk of the query's own
index, or the reranker ranks by the very score that search used, the expanded searches (and the
expansion call feeding them) are dropped before a reranker, and kept in every case where they could
change what reaches the prompt."""

from apps import advanced_rag
from teola import App, Engine, Node, PrimOp
from tests.factories import make_engines

# a sentence-transformers CrossEncoder folder (never loaded: compilation only reads the options)
CROSS_ENCODER = {"model": "/models/ms-marco-MiniLM-L-6-v2"}
PARA = "Paragraph {i}: the river Ouse flows through York and is {i} miles long."


def query(paragraphs: int) -> dict:
    return {
        "question": "How long is the river Ouse?",
        "documents": [" ".join(PARA.format(i=i) for i in range(paragraphs))],
    }


def chunks(app: App, q: dict) -> int:
    return len(app.compile(q).inputs["indexing.chunks"])


def expansion(g) -> list:
    return g.find(component="query_expansion")


def pruned(app: App, q: dict):
    """Compile `q` and check that the expansion and the expanded searches are gone."""
    compiled = app.compile(q)
    g = compiled.egraph
    g.lint()
    assert "prune_covered_searches" in compiled.passes_applied
    assert expansion(g) == []
    assert [p.label for p in g.find(PrimOp.SEARCHING)] == ["search_question"]
    assert [p.label for p in g.find(PrimOp.EMBEDDING, component="query_embedding")] == ["embed_question"]
    llm = [p for p in g.primitives if p.engine == "llm"]
    assert llm and all(p.component == "synthesis" for p in llm)
    return compiled


def test_small_document_drops_expansion_and_its_searches():
    app = advanced_rag.build(reranker=CROSS_ENCODER)  # whatever the reranker: the search holds every chunk
    q = query(40)
    n = chunks(app, q)
    assert 0 < n <= 16
    compiled = pruned(app, q)
    (rerank,) = compiled.egraph.find(PrimOp.RERANKING)
    assert rerank.num_requests == n
    # the decomposed graph still holds the whole template: only the optimizer drops work
    assert expansion(compiled.pgraph)


def test_document_larger_than_top_k_keeps_expansion_before_a_cross_encoder():
    app = advanced_rag.build(reranker=CROSS_ENCODER)
    q = query(300)
    assert chunks(app, q) > 16
    g = app.compile(q).egraph
    assert len(g.find(PrimOp.PARTIAL_DECODING, component="query_expansion")) == 3
    assert len(g.find(PrimOp.SEARCHING)) == 4


def test_reranker_scoring_like_the_search_drops_expansion_on_a_large_document():
    # the default reranker is the cosine of the same MiniLM embeddings of the same question that the
    # question's own (exact) search ranked the index by: its top 3 are that search's top 3
    app = advanced_rag.build()
    q = query(300)
    assert chunks(app, q) > 16
    (rerank,) = pruned(app, q).egraph.find(PrimOp.RERANKING)
    assert rerank.num_requests == 16  # the question's own top_k


def test_different_rankings_keep_expansion_on_a_large_document():
    q = query(300)
    cases = [
        ({"reranker": {"bi_encoder": "/models/other-bi-encoder"}}, None),  # another model's cosine
        ({"embedding": {"model": "/models/other-bi-encoder"}}, None),  # search by another model
        ({}, {"nodes": {"rerank": {"top_n": 17}}}),  # keeps more than the question's search holds
    ]
    for engines, config in cases:
        compiled = advanced_rag.build(**engines).compile(q, config)
        assert len(compiled.egraph.find(PrimOp.SEARCHING)) == 4, (engines, config)
        assert "prune_covered_searches" not in compiled.passes_applied


def test_a_store_backend_that_declares_no_ranking_keeps_expansion():
    app = advanced_rag.build()
    app.register_engine(Engine("vectordb", kind="pgvector"), backend=object())  # e.g. an approximate store
    assert len(app.compile(query(300)).egraph.find(PrimOp.SEARCHING)) == 4


def test_smaller_top_k_keeps_expansion():
    app = advanced_rag.build()
    g = app.compile(query(40), {"nodes": {"search": {"top_k": 2}}}).egraph
    assert expansion(g)


def test_kept_namespace_keeps_expansion():
    # a namespace kept across queries may hold other documents: the question's top_k is not all of it
    app = advanced_rag.build()
    compiled = app.compile(query(40), {"namespace": "team-docs"})
    assert expansion(compiled.egraph)
    assert "prune_covered_searches" not in compiled.passes_applied
    # and the graph cache does not serve the pruned graph to a kept-namespace query (or back)
    assert expansion(app.compile(query(40)).egraph) == []
    assert expansion(app.compile(query(40), {"namespace": "team-docs"}).egraph)


def test_pass_off_keeps_expansion():
    app = advanced_rag.build()
    g = app.compile(query(40), {"passes": {"prune_covered_searches": False}}).egraph
    assert len(g.find(PrimOp.SEARCHING)) == 4


def test_without_reranker_nothing_is_dropped():
    # without a reranker the gathered hits (duplicates included) are the context itself
    app = make_engines(App("no_rerank"))
    expand = Node("query_expansion", engine="llm", config={"num_queries": 2})
    index = Node("indexing", engine="embedding")
    ingest = Node("ingestion", engine="vectordb")
    embed = Node("query_embedding", engine="embedding")
    search = Node("search", engine="vectordb", config={"top_k": 16})
    synth = Node("synthesis", engine="llm")
    index >> ingest >> search
    expand >> embed >> search >> synth
    app.update_template([expand, index, ingest, embed, search, synth])
    compiled = app.compile(query(40))
    assert expansion(compiled.egraph)
    assert "prune_covered_searches" not in compiled.passes_applied
