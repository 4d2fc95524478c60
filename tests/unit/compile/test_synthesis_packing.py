"""Synthesis packs retrieved chunks into as few prompts as fit the LLM's context window
(LlamaIndex's compact / tree_summarize semantics), planned at compile time."""

import pytest

from apps import advanced_rag, naive_rag
from teola import PrimOp
from teola.compile.components.packing import TOKEN_RATIO, context_budget, pack_ranges
from teola.ir.refs import Ref
from teola.runtime.requests import resolve_part

DOC = " ".join(f"Paragraph {i}: the river Ouse flows through York and is {i} miles long." for i in range(120))
QUERY = {"question": "How long is the river Ouse?", "documents": [DOC]}


def llm_calls(compiled, component="synthesis"):
    return [p for p in compiled.pgraph.primitives if p.op is PrimOp.DECODING and p.component == component]


def context_parts(compiled):
    return [
        src
        for p in compiled.pgraph.primitives
        if p.op is PrimOp.PREFILLING and p.component == "synthesis"
        for name, src in p.args["parts"]
        if name == "context"
    ]


def test_naive_app_makes_one_llm_call_when_its_chunks_fit():
    compiled = naive_rag.build().compile(QUERY)
    assert len(llm_calls(compiled)) == 1
    [ctx] = context_parts(compiled)
    assert (ctx.key, ctx.index, ctx.stop) == ("search.results", 0, 3)


def test_advanced_app_compacts_its_reranked_chunks_into_one_call():
    compiled = advanced_rag.build().compile(QUERY)
    assert len(llm_calls(compiled)) == 1
    assert len(llm_calls(compiled, "query_expansion")) == 1


def test_a_small_context_window_splits_the_chunks_over_several_calls():
    # 1024 tokens leave room for one 256-token chunk at the 2x token bound: tree = 3 leaves + 1 merge
    compiled = naive_rag.build(llm={"max_model_len": 1024}).compile(QUERY)
    calls = llm_calls(compiled)
    assert len(calls) == 4
    assert [(r.index, r.stop) for r in context_parts(compiled)] == [(0, None), (1, None), (2, None)]
    compact = advanced_rag.build(llm={"max_model_len": 1024}).compile(QUERY)
    assert len(llm_calls(compact)) == 3  # answer from the first chunk, refine with each further one


def test_refine_mode_makes_one_call_per_chunk_and_pack_size_overrides():
    refine = advanced_rag.build().compile(QUERY, {"nodes": {"synthesis": {"mode": "refine"}}})
    assert len(llm_calls(refine)) == 3
    packed = naive_rag.build().compile(QUERY, {"nodes": {"synthesis": {"pack_size": 2}}})
    assert [(r.index, r.stop) for r in context_parts(packed)] == [(0, 2), (2, None)]
    assert len(llm_calls(packed)) == 3  # two leaves, one merge


def test_bad_packing_options_name_the_option():
    with pytest.raises(ValueError, match="token_ratio"):
        naive_rag.build().compile(QUERY, {"nodes": {"synthesis": {"token_ratio": "x"}}})
    with pytest.raises(ValueError, match="pack_size"):
        naive_rag.build().compile(QUERY, {"nodes": {"synthesis": {"pack_size": 0}}})


def test_pack_ranges_and_budget():
    assert pack_ranges(5, 100, 450, ratio=2.0) == [(0, 2), (2, 4), (4, 5)]
    assert pack_ranges(3, 0, 10_000) == [(0, 1), (1, 2), (2, 3)]  # sizes unknown: one item a prompt
    assert pack_ranges(0, 100, 10_000) == [(0, 1)]
    assert pack_ranges(4, 100, 10, pack_size=3) == [(0, 3), (3, 4)]
    assert pack_ranges(2, 100, 10) == [(0, 1), (1, 2)]  # never less than one item a prompt
    assert context_budget(0, ["x"], 10) == 0
    assert context_budget(2048, ["one two three"], 96) == 2048 - 96 - 64 - 64 - 3 * TOKEN_RATIO


def test_a_ref_range_joins_those_items_and_tolerates_short_lists():
    values = {"k": ["a", "b", "c"]}
    assert resolve_part(Ref("k", index=0, join=" | ", stop=2), values) == "a | b"
    assert resolve_part(Ref("k", index=2, join=" | ", stop=5), values) == "c"
    assert resolve_part(Ref("k", index=4, join=" | ", stop=6), values) == ""
    assert str(Ref("k", index=1, stop=3)) == "$k[1:3]"


def test_the_question_is_searched_alongside_the_expanded_queries():
    compiled = advanced_rag.build().compile(QUERY)
    searches = [p for p in compiled.pgraph.primitives if p.op is PrimOp.SEARCHING]
    assert sorted(p.label for p in searches) == ["search", "search_question"]
    [q] = [p for p in compiled.pgraph.primitives if p.label == "embed_question"]
    assert q.inputs == ("query.question",)
    off = advanced_rag.build().compile(QUERY, {"nodes": {"query_embedding": {"include_question": False}}})
    assert [p.label for p in off.pgraph.primitives if p.op is PrimOp.SEARCHING] == ["search"]


def test_a_cached_graph_is_reused_only_within_a_question_length_class():
    app = naive_rag.build()
    a = app.compile(QUERY)
    b = app.compile({**QUERY, "question": "How long is the river Aire?"})
    assert b.cache_hit
    c = app.compile({**QUERY, "question": "How long is the river Ouse? " * 40})
    assert not c.cache_hit and a.egraph is not c.egraph
