"""Each pass on 2-5 node graphs: what it rewrites, what it leaves alone, and lint after it."""

import pytest

from teola import PrimOp, Ref
from teola.passes import PassError, PassOptionError, get_pass, register_pass, run_pipeline, unregister_pass
from teola.passes.result import PassResult
from tests.factories import make_graph

P, D, E = PrimOp.PREFILLING, PrimOp.DECODING, PrimOp.EMBEDDING


def test_prune_removes_only_edges_without_data():
    g = make_graph(
        (P, ("query.question",), ("a.kv",)),
        (D, ("a.kv",), ("a.text",)),
        (E, ("query.question",), ("b.emb",)),
        edges=((1, 2),),
        p0={"parts": [("question", Ref("query.question"))]},
        p2={"map": ("query.question",)},
    )
    r = get_pass("prune_dependencies")(g)
    assert r.modified
    assert set(r.graph.nx.edges) == {(0, 1)}
    assert set(g.nx.edges) == {(0, 1), (1, 2)}  # the input graph is untouched (pure pass)
    r.graph.lint()
    assert not get_pass("prune_dependencies")(r.graph).modified


def test_stage_decomposition_splits_above_max_efficient_batch_and_aggregates():
    g = make_graph(
        (E, ("idx.chunks",), ("idx.emb",)),
        (PrimOp.INGESTION, ("idx.emb", "idx.chunks"), ("ing.index",)),
        inputs=("idx.chunks",),
        p0={"map": ("idx.chunks",), "batchable": True, "n": 10},
        p1={"map": ("idx.emb", "idx.chunks"), "n": 10},
    )
    r = get_pass("stage_decomposition")(g)
    r.graph.lint()
    embeds = r.graph.find(PrimOp.EMBEDDING)
    assert sorted(p.args["slice"] for p in embeds) == [(0, 4), (4, 8), (8, 10)]  # emb engine max eff = 4
    ingests = r.graph.find(PrimOp.INGESTION)
    assert sorted(p.args["slice"] for p in ingests) == [(0, 4), (4, 8), (8, 10)]
    assert all(p.inputs[0].startswith("idx.emb#") for p in ingests)
    agg = r.graph.find(PrimOp.AGGREGATE)
    assert len(agg) == 1 and agg[0].outputs == ("ing.index",)
    assert not get_pass("stage_decomposition")(r.graph).modified


def test_stage_decomposition_leaves_small_and_unannotated_batches():
    g = make_graph((E, ("c",), ("e",)), inputs=("c",), p0={"map": ("c",), "batchable": True, "n": 4})
    assert not get_pass("stage_decomposition")(g).modified
    g = make_graph((E, ("c",), ("e",)), inputs=("c",), p0={"map": ("c",), "n": 40})
    assert not get_pass("stage_decomposition")(g).modified


def test_prefill_split_prefills_ready_prefix_and_keeps_causal_order():
    parts = [("instruction", "Answer."), ("question", Ref("query.question")), ("context", Ref("r.ctx"))]
    g = make_graph(
        (E, ("query.question",), ("r.ctx",)),
        (P, ("query.question", "r.ctx"), ("s.kv",)),
        (D, ("s.kv",), ("s.text",)),
        p0={"map": ("query.question",)},
        p1={"parts": parts},
    )
    r = get_pass("prefill_split")(g)
    r.graph.lint()
    (pp,) = r.graph.find(PrimOp.PARTIAL_PREFILLING)
    (full,) = r.graph.find(PrimOp.FULL_PREFILLING)
    assert [n for n, _ in pp.args["parts"]] == ["instruction", "question"]
    assert r.graph.parents(pp) == []
    assert {p.id for p in r.graph.parents(full)} == {pp.id, r.graph.find(E)[0].id}
    assert [c.op for c in r.graph.children(full)] == [D]


def test_prefill_split_needs_a_late_part_after_an_early_one():
    # context first: nothing can be prefilled before it, so no split
    parts = [("context", Ref("r.ctx")), ("question", Ref("query.question"))]
    g = make_graph(
        (E, ("query.question",), ("r.ctx",)),
        (P, ("query.question", "r.ctx"), ("s.kv",)),
        p0={"map": ("query.question",)},
        p1={"parts": parts},
    )
    assert not get_pass("prefill_split")(g).modified
    # all parts ready at once: nothing to split
    g = make_graph(
        (P, ("query.question",), ("s.kv",)), p0={"parts": [("i", "x"), ("q", Ref("query.question"))]}
    )
    assert not get_pass("prefill_split")(g).modified


def test_prefill_split_more_partials_prefill_each_growing_prefix():
    parts = [
        ("instruction", "Refine."),
        ("question", Ref("query.question")),
        ("context", Ref("r.ctx")),
        ("existing_answer", Ref("a.text")),
    ]
    g = make_graph(
        (E, ("query.question",), ("r.ctx",)),
        (D, ("query.question",), ("a.text",)),
        (P, ("query.question", "r.ctx", "a.text"), ("s.kv",)),
        p0={"map": ("query.question",)},
        p2={"parts": parts},
    )
    r = get_pass("prefill_split")(g, max_partials=2)
    r.graph.lint()
    pps = sorted(r.graph.find(PrimOp.PARTIAL_PREFILLING), key=lambda p: len(p.args["parts"]))
    assert [len(p.args["parts"]) for p in pps] == [2, 3]
    assert pps[0].id in {p.id for p in r.graph.parents(pps[1])}


def test_decode_pipelining_makes_one_partial_decoding_per_item_feeding_its_own_reader():
    g = make_graph(
        (P, ("query.question",), ("x.kv",)),
        (D, ("x.kv",), ("x.items",)),
        (E, ("x.items",), ("y.emb",)),
        p0={"parts": [("q", Ref("query.question"))]},
        p1={"splittable": True, "split": "list", "n_items": 3},
        p2={"map": ("x.items",), "n": 3},
    )
    g.outputs = ("y.emb",)
    r = get_pass("decode_pipelining")(g)
    r.graph.lint()
    pds = r.graph.find(PrimOp.PARTIAL_DECODING)
    assert [p.args["item"] for p in pds] == [0, 1, 2]
    for pd in pds:
        (child,) = r.graph.children(pd)
        assert child.op == E and child.num_requests == 1
    (agg,) = r.graph.find(PrimOp.AGGREGATE)
    assert agg.outputs == ("y.emb",)  # the graph output is reassembled
    assert not get_pass("decode_pipelining")(r.graph).modified


def test_decode_pipelining_ignores_unannotated_decoding():
    g = make_graph(
        (P, ("query.question",), ("x.kv",)),
        (D, ("x.kv",), ("x.items",)),
        p0={"parts": [("q", Ref("query.question"))]},
        p1={"split": "list", "n_items": 3},
    )
    assert not get_pass("decode_pipelining")(g).modified


def test_failing_pass_is_reraised_naming_previous_passes():
    def broken(graph):
        raise RuntimeError("boom")

    register_pass("broken", broken)
    try:
        g = make_graph((P, ("query.question",), ("x.kv",)), p0={"parts": [("q", Ref("query.question"))]})
        with pytest.raises(
            PassError,
            match=r"pass 'broken' failed \(after prune_covered_searches, speculative_search, "
            r"speculative_call, prune_dependencies, stage_decomposition, prefill_split, "
            r"decode_pipelining\): boom",
        ):
            run_pipeline(g)
    finally:
        unregister_pass("broken")


def test_custom_pass_runs_and_can_be_switched_off_per_query():
    calls = []

    def tag(graph):
        calls.append(len(graph))
        return PassResult(graph, False)

    register_pass("tag", tag, before="prefill_split")
    try:
        g = make_graph((P, ("query.question",), ("x.kv",)), p0={"parts": [("q", Ref("query.question"))]})
        run_pipeline(g)
        assert calls == [1]
        run_pipeline(g, {"tag": False})
        assert calls == [1]
    finally:
        unregister_pass("tag")


def test_a_pass_that_breaks_the_graph_is_caught_by_lint():
    def cut_edges(graph):
        g = graph.copy()
        g.nx.remove_edges_from(list(g.nx.edges))
        return PassResult(g, True)

    register_pass("cut", cut_edges)
    try:
        g = make_graph(
            (P, ("query.question",), ("x.kv",)),
            (D, ("x.kv",), ("x.t",)),
            p0={"parts": [("q", Ref("query.question"))]},
        )
        with pytest.raises(PassError, match=r"pass 'cut' broke the graph.*no edge"):
            run_pipeline(g, lint=True)
    finally:
        unregister_pass("cut")


def test_module_chain_edges_survive_pruning_and_copy():
    g = make_graph(
        (P, ("query.question",), ("a.kv",)),
        (E, ("query.question",), ("b.emb",)),
        p0={"parts": [("q", Ref("query.question"))]},
        p1={"map": ("query.question",)},
    )
    chained = get_pass("module_chain")(g)
    assert chained.modified and chained.graph.nx.has_edge(0, 1)
    pruned = get_pass("prune_dependencies")(chained.graph.copy())
    assert not pruned.modified and pruned.graph.nx.has_edge(0, 1)


def test_prefill_split_shares_one_partial_between_calls_with_the_same_prefix():
    same = [("instruction", "Answer."), ("question", Ref("query.question")), ("context", Ref("r.ctx"))]
    other = [("instruction", "Refine."), ("question", Ref("query.question")), ("context", Ref("r.ctx"))]
    g = make_graph(
        (E, ("query.question",), ("r.ctx",)),
        (P, ("query.question", "r.ctx"), ("a.kv",)),
        (P, ("query.question", "r.ctx"), ("b.kv",)),
        (P, ("query.question", "r.ctx"), ("c.kv",)),
        p0={"map": ("query.question",)},
        p1={"parts": same},
        p2={"parts": list(same)},
        p3={"parts": other},
    )
    r = get_pass("prefill_split")(g)
    r.graph.lint()
    partials = r.graph.find(PrimOp.PARTIAL_PREFILLING)
    assert sorted(p.args["parts"][0][1] for p in partials) == ["Answer.", "Refine."]
    fulls = {
        f.outputs[0]: [q.id for q in r.graph.parents(f) if q.op is PrimOp.PARTIAL_PREFILLING]
        for f in r.graph.find(PrimOp.FULL_PREFILLING)
    }
    assert fulls["a.kv"] == fulls["b.kv"] != fulls["c.kv"]


def test_component_order_runs_expansion_before_indexing_only_when_asked():
    import networkx as nx

    from apps import advanced_rag
    from teola import PrimOp

    query = {"question": "q?", "documents": ["word " * 6000]}  # more chunks than the search's top_k
    app = advanced_rag.build(reranker={"model": "/models/cross-encoder"})  # expansion can count: kept
    g = app.compile(
        query, {"passes": {"component_order": {"order": [["query_expansion", "indexing"]]}}}
    ).egraph
    index = g.find(PrimOp.EMBEDDING, component="indexing")
    expansion = g.find(component="query_expansion")
    assert index and expansion and all(nx.has_path(g.nx, e.id, i.id) for e in expansion for i in index)
    default = app.compile(query).egraph
    assert not any(
        nx.has_path(default.nx, e.id, i.id)
        for e in default.find(component="query_expansion")
        for i in default.find(PrimOp.EMBEDDING, component="indexing")
    )
    with pytest.raises(PassOptionError, match="no component .nope."):
        app.compile(query, {"passes": {"component_order": {"order": [["nope", "indexing"]]}}})
    # a small document's expansion is pruned (its search covers the index): nothing to order, no error
    small = app.compile(
        {"question": "q?", "documents": ["word " * 300]},
        {"passes": {"component_order": {"order": [["query_expansion", "indexing"]]}}},
    ).egraph
    assert small.find(component="query_expansion") == [] and small.find(
        PrimOp.EMBEDDING, component="indexing"
    )


def test_pass_options_of_the_wrong_shape_are_the_clients_mistake():
    from apps import naive_rag

    app = naive_rag.build()
    query = {"question": "q?", "documents": ["word " * 300]}
    with pytest.raises(
        PassOptionError,
        match=r"config.passes.prefill_split.bogus: unknown option \(got 1\); "
        "options: max_partials",
    ):
        app.compile(query, {"passes": {"prefill_split": {"bogus": 1}}})
    # typed and bounded by the pass's signature
    for bad in (0, 65, "2", True, 1.5):
        with pytest.raises(PassOptionError, match="config.passes.prefill_split.max_partials: "):
            app.compile(query, {"passes": {"prefill_split": {"max_partials": bad}}})
    with pytest.raises(PassOptionError, match="config.passes.stage_decomposition.batch_size: "):
        app.compile(query, {"passes": {"stage_decomposition": {"batch_size": -1}}})
    app.compile(
        query, {"passes": {"prefill_split": {"max_partials": 2}, "stage_decomposition": {"batch_size": None}}}
    )
    with pytest.raises(PassOptionError, match="config.passes.component_order"):
        app.compile(query, {"passes": {"component_order": {"order": "x"}}})
    with pytest.raises(TypeError, match="true, false or a dict"):
        app.compile(query, {"passes": {"prefill_split": "yes"}})
