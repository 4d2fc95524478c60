"""Which intermediate outputs the Ray "refs" data path may keep in the object store
(teola.runtime.graph_tier.dispatch_plan.remote_outputs): embeddings read only by ingestion / vector search,
directly or through the concat aggregates that gather split stages; never a query output."""

from apps.advanced_rag import set_template
from teola import App, Engine
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.runtime.graph_tier.dispatch_plan import DispatchPlan, build_plan, remote_outputs

DOC = " ".join(f"paris is the capital of france fact{i} river seine museum louvre" for i in range(40))
QUERY = {"question": "what is the capital of france", "documents": [DOC]}


def rag_plan(config=None):
    app = App("rag")
    for name, kind in (
        ("llm", "vllm"),
        ("embedding", "sentence_transformers"),
        ("vectordb", "pgvector"),
        ("reranker", "reranker"),
    ):
        app.register_engine(Engine(name, kind=kind))
    set_template(app, chunk_size=64, chunk_overlap=8, top_k=4, max_tokens=32)
    # the expanded queries' embeddings too: keep them (the default reranker would let them be pruned)
    return build_plan(
        app.compile(QUERY, {"passes": {"prune_covered_searches": False}} | (config or {})).egraph
    )


def test_every_embedding_of_the_rag_graph_may_stay_remote_and_nothing_else():
    plan = rag_plan()
    embeds = {i for i, p in enumerate(plan.prims) if p.op is PrimOp.EMBEDDING}
    assert len(embeds) > 2 and set(plan.remote) == embeds
    for i, keys in plan.remote.items():
        assert plan.prims[i].outputs[0] in keys and not keys & set(plan.outputs)


def gathered_plan(reader: PrimOp, outputs: tuple[str, ...] = ("hits",)) -> DispatchPlan:
    """Two embedding stages, a concat aggregate gathering them, and one reader of the whole list."""
    prims = [
        Primitive(PrimOp.EMBEDDING, "embedding", "c", ("chunks",), ("e#0:2",), {"map": ("chunks",)}),
        Primitive(PrimOp.EMBEDDING, "embedding", "c", ("chunks",), ("e#2:4",), {"map": ("chunks",)}),
        Primitive(PrimOp.AGGREGATE, None, "c", ("e#0:2", "e#2:4"), ("e",), {"mode": "concat"}),
        Primitive(reader, "vectordb", "c", ("e",), ("hits",), {"map": ("e",)}),
    ]
    plan = DispatchPlan(
        prims, [0, 0, 2, 1], [(2,), (2,), (3,), ()], [0, 1], [False, False, True, False], outputs=outputs
    )
    return plan


def test_keys_gathered_by_a_concat_aggregate_are_carried_along():
    assert remote_outputs(gathered_plan(PrimOp.SEARCHING)) == {
        0: frozenset({"e#0:2", "e"}),
        1: frozenset({"e#2:4", "e"}),
    }
    assert (
        remote_outputs(gathered_plan(PrimOp.SEARCHING, ("hits", "e"))) == {}
    )  # the gathered list is an output
    assert remote_outputs(gathered_plan(PrimOp.TOOL)) == {}  # a reader that is not a pass-through


def test_an_embedding_that_is_a_query_output_comes_back():
    plan = rag_plan()
    i = next(iter(plan.remote))
    plan.outputs = (*plan.outputs, plan.prims[i].outputs[0])
    assert i not in remote_outputs(plan)


def test_an_embedding_read_by_the_driver_comes_back():
    plan = rag_plan()
    i = next(iter(plan.remote))
    key = plan.prims[i].outputs[0]
    c = next(c for c in plan.children[i] if key in plan.prims[c].inputs)
    plan.prims[c] = plan.prims[c].clone(op=PrimOp.RERANKING)  # a reader that looks at the values
    assert i not in remote_outputs(plan)
