"""Template validation: every bad template raises the documented error naming the problem."""

import pytest

from teola import App, Engine, Node
from tests.factories import make_engines


def app():
    return make_engines(App("t"))


def test_chain_with_rshift_returns_right_side_and_lists_fan_in():
    a, b, c = (
        Node("llm", name="a", engine="llm"),
        Node("llm", name="b", engine="llm"),
        Node("aggregate", name="c"),
    )
    assert (a >> b) is b
    assert ([a, b] >> c) is c
    assert c.upstream == [a, b] and a.downstream == [b, c]


def test_rshift_with_non_node_is_type_error():
    with pytest.raises(TypeError, match="right side must be a Node"):
        Node("llm", engine="llm") >> "synthesis"
    with pytest.raises(TypeError, match="left side must be a Node"):
        ["x", Node("llm", engine="llm")] >> Node("aggregate")


def test_cycle_is_rejected_naming_the_nodes():
    a, b = Node("llm", name="a", engine="llm"), Node("llm", name="b", engine="llm")
    a >> b >> a
    with pytest.raises(ValueError, match=r"cycle: .*a.*b"):
        app().update_template([a, b])


def test_unknown_engine_names_node_and_fix():
    n = Node("llm", name="gen", engine="gpt")
    with pytest.raises(ValueError, match=r"node 'gen' uses engine 'gpt'.*register_engine"):
        app().update_template([n])


def test_missing_input_names_node_and_port():
    search = Node("search", engine="vectordb")
    with pytest.raises(ValueError, match=r"node 'search' \(search\) needs a 'query_embeddings' input"):
        app().update_template([search])


def test_splittable_on_non_llm_node_is_rejected():
    n = Node("indexing", engine="embedding", anno="splittable")
    with pytest.raises(ValueError, match=r"node 'indexing'.*splittable.*only to LLM"):
        app().update_template([n])


def test_unknown_annotation_kind_and_duplicate_names():
    with pytest.raises(ValueError, match="unknown anno"):
        Node("llm", engine="llm", anno="fast")
    with pytest.raises(ValueError, match="unknown component kind 'magic'"):
        app().update_template([Node("magic", engine="llm")])
    with pytest.raises(ValueError, match="two nodes are named 'x'"):
        app().update_template([Node("llm", name="x", engine="llm"), Node("llm", name="x", engine="llm")])


def test_edge_to_node_outside_template_and_control_with_engine():
    a, b = Node("llm", name="a", engine="llm"), Node("llm", name="b", engine="llm")
    a >> b
    with pytest.raises(ValueError, match="'b' is not in the template"):
        app().update_template([a])
    with pytest.raises(ValueError, match="control node"):
        app().update_template([Node("condition", engine="llm", config={"contains": "x"})])


def test_bad_engine_and_config_values():
    with pytest.raises(ValueError, match="unknown kind 'tpu'"):
        Engine("x", kind="tpu")
    with pytest.raises(
        ValueError,
        match=r"node 'synthesis' config.mode: Input should be 'compact', 'refine' or 'tree' \(got 'fast'\)",
    ):
        a = app()
        e, s, q = (
            Node("query_embedding", engine="embedding"),
            Node("search", engine="vectordb"),
            Node("synthesis", engine="llm", config={"mode": "fast"}),
        )
        i, g = Node("indexing", engine="embedding"), Node("ingestion", engine="vectordb")
        i >> g >> s
        e >> s >> q
        a.update_template([i, g, e, s, q])
    with pytest.raises(TypeError, match="register_engine takes an Engine"):
        app().register_engine("llm")


def test_query_errors_name_the_field():
    a = app()
    a.update_template([Node("llm", engine="llm")])
    with pytest.raises(ValueError, match=r"query\['question'\]"):
        a.compile({"q": "x"})
    with pytest.raises(TypeError, match="a query must be a dict"):
        a.compile("what?")
    with pytest.raises(ValueError, match="unknown pass 'fuse'"):
        a.compile({"question": "x"}, {"passes": {"fuse": True}})


def test_huge_document_is_rejected_with_the_limit():
    from apps.naive_rag import build

    a = build()
    with pytest.raises(ValueError, match=r"more than 20 chunks.*max_chunks"):
        a.compile(
            {"question": "q", "documents": ["word " * 10_000]}, {"nodes": {"indexing": {"max_chunks": 20}}}
        )


def test_config_for_an_unknown_node_is_rejected():
    a = app()
    a.update_template([Node("llm", engine="llm")])
    with pytest.raises(ValueError, match=r"unknown node\(s\) \['synth'\]"):
        a.compile({"question": "x"}, {"nodes": {"synth": {"mode": "tree"}}})


@pytest.mark.parametrize("task", ["{x}", "{0}", "{n.__class__.__nope}", "Write {n} queries {"])
def test_user_prompt_text_is_data_not_a_format_string(task):
    from apps import advanced_rag
    from teola import PrimOp

    g = (
        advanced_rag.build()
        .compile({"question": "q?", "documents": ["a b c"]}, {"nodes": {"query_expansion": {"task": task}}})
        .pgraph
    )
    [prefill] = [p for p in g.primitives if p.op is PrimOp.PREFILLING and p.component == "query_expansion"]
    assert dict(prefill.args["parts"])["task"] == task.replace("{n}", "3")


def test_unknown_options_in_a_querys_node_config_are_named():
    from apps import advanced_rag

    app = advanced_rag.build()
    query = {"question": "q?", "documents": ["a b c"]}
    with pytest.raises(ValueError, match=r"config.nodes.search.top_kk: unknown option \(got 3\)"):
        app.compile(query, {"nodes": {"search": {"top_kk": 3}}})
    # an option of the kind that this node, as configured, never reads
    with pytest.raises(ValueError, match=r"config.nodes.synthesis.fan_in: option\(s\) 'fan_in' are not used"):
        app.compile(query, {"nodes": {"synthesis": {"mode": "refine", "fan_in": 3}}})
    with pytest.raises(ValueError, match="config.nodes.rerank.chunk_size"):
        app.compile(query, {"nodes": {"rerank": {"chunk_size": 3}}})
    app.compile(
        query,
        {
            "nodes": {
                "indexing": {"chunk_size": 64},
                "search": {"top_k": 4},
                "synthesis": {"mode": "refine", "max_tokens": 8},
            }
        },
    )


def test_graph_size_options_are_bounded_and_the_graph_by_the_data():
    from apps import advanced_rag, naive_rag

    # 1000 tokens of any count (words or the embedder's WordPiece): five chunks of 256
    query = {"question": "q?", "documents": [" ".join(["river"] * 1000)]}
    for node, key in (("search", "top_k"), ("rerank", "top_n"), ("query_expansion", "num_queries")):
        with pytest.raises(
            ValueError, match=rf"config.nodes.{node}.{key}: Input should be less than or equal to"
        ):
            advanced_rag.build().compile(query, {"nodes": {node: {key: 10**9}}})
    small = naive_rag.build().compile(query).egraph
    huge = naive_rag.build().compile(query, {"nodes": {"search": {"top_k": 10_000}}}).egraph
    # five chunks: a search finds at most five, so synthesis plans for five (two packs and a
    # merge), not ten thousand
    assert len(small.primitives) < len(huge.primitives) < 20
