"""Primitive semantics (teola/runtime/requests.py, outputs.py): requests, outputs, control ops, skipping."""

import pytest

from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.ir.refs import Ref
from teola.runtime.outputs import collect_outputs
from teola.runtime.requests import PrimitiveInputError, build_requests, is_skipped, resolve_part, run_control


def prim(op, inputs=(), outputs=("out",), **args):
    return Primitive(
        op,
        None if op in (PrimOp.CONDITION, PrimOp.AGGREGATE) else "e",
        "c",
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        args=args,
    )


def test_map_slices_a_part_key_by_absolute_items():
    p = prim(PrimOp.EMBEDDING, ["chunks#4:8"], map=("chunks#4:8",), slice=(5, 7))
    values = {"chunks#4:8": ["c4", "c5", "c6", "c7"]}
    assert build_requests(p, values) == [{"text": "c5"}, {"text": "c6"}]


def test_scalar_map_input_is_one_item():
    p = prim(PrimOp.EMBEDDING, ["q"], map=("q",))
    assert build_requests(p, {"q": "hello"}) == [{"text": "hello"}]


def test_ingestion_carries_namespace_and_absolute_chunk_index():
    p = prim(
        PrimOp.INGESTION, ["emb#2:4", "chunks", "sys.namespace"], map=("emb#2:4", "chunks"), slice=(2, 4)
    )
    values = {"emb#2:4": [[0.1], [0.2]], "chunks": ["a", "b", "c", "d"], "sys.namespace": "ns"}
    assert build_requests(p, values) == [
        {"namespace": "ns", "text": "c", "embedding": [0.1], "meta": {"chunk": 2}},
        {"namespace": "ns", "text": "d", "embedding": [0.2], "meta": {"chunk": 3}},
    ]


def test_misaligned_map_inputs_raise():
    p = prim(PrimOp.INGESTION, ["e", "c"], map=("e", "c"))
    with pytest.raises(PrimitiveInputError, match="not aligned"):
        build_requests(p, {"e": [[1.0]], "c": ["a", "b"], "sys.namespace": "n"})


def test_vector_and_text_search_requests():
    v = prim(PrimOp.SEARCHING, ["emb", "ingestion.index"], map=("emb",), top_k=2)
    assert build_requests(v, {"emb": [[1.0]], "sys.namespace": "ns"}) == [
        {"namespace": "ns", "embedding": [1.0], "top_k": 2, "exact": False}
    ]
    own = prim(PrimOp.SEARCHING, ["emb", "ingestion.index"], map=("emb",), top_k=2, own_namespace=True)
    assert (
        build_requests(own, {"emb": [[1.0]], "sys.namespace": "ns"})[0]["exact"] is True
    )  # the query's own chunks
    t = prim(PrimOp.SEARCHING, ["qs"], map=("qs",), top_k=3, text_query=True)
    assert build_requests(t, {"qs": ["a", "b"]}) == [{"query": "a", "top_k": 3}, {"query": "b", "top_k": 3}]


def test_rerank_dedupes_and_keeps_top_n_best_first():
    p = prim(PrimOp.RERANKING, ["question", "results"], top_n=2)
    values = {"question": "q", "results": [[{"text": "x"}, {"text": "y"}], [{"text": "x"}, {"text": "z"}]]}
    reqs = build_requests(p, values)
    assert reqs == [{"query": "q", "text": t} for t in ("x", "y", "z")]
    assert collect_outputs(p, reqs, [0.1, 0.9, 0.5]) == {"out": ["y", "z"]}


def test_resolve_refs():
    values = {"ctx": [[{"text": "a"}, {"text": "b"}], [{"text": "c"}]], "s": "str", "l": ["x", "y"]}
    assert resolve_part(Ref("ctx", index=2), values) == "c"
    assert resolve_part(Ref("ctx", index=7), values) == ""
    assert resolve_part(Ref("ctx", join="|"), values) == "a|b|c"
    assert resolve_part(Ref("s"), values) == "str"
    assert resolve_part("literal", values) == "literal"
    assert resolve_part(Ref("l"), values) == "x\n\ny"


def test_llm_requests_and_kv_state():
    pp = prim(PrimOp.PARTIAL_PREFILLING, ["q"], ["kv.prefix0"], parts=[("i", "Inst"), ("q", Ref("q"))])
    [r] = build_requests(pp, {"q": "why?"})
    # the engine priority is the dispatch record's (the graph tier hands the query's in), not the body's
    assert r["parts"] == [["i", "Inst"], ["q", "why?"]] and r["complete"] is False and "priority" not in r
    full = prim(PrimOp.FULL_PREFILLING, ["q"], ["kv"], parts=[("i", "Inst"), ("q", Ref("q"))])
    [r] = build_requests(full, {"q": "why?"})
    assert r["complete"] is True
    out = collect_outputs(full, [r], [{"num_prompt_tokens": 5, "num_cached_tokens": 2}])
    assert out == {"kv": {"parts": r["parts"], "num_prompt_tokens": 5, "num_cached_tokens": 2}}
    dec = prim(PrimOp.DECODING, ["kv"], ["ans"], max_tokens=7, temperature=0.0, stop=None)
    [d] = build_requests(dec, out)
    assert d["parts"] == r["parts"] and d["max_tokens"] == 7 and d["complete"] is True
    assert collect_outputs(dec, [d], [{"text": "hi", "items": []}]) == {"ans": "hi"}
    split = prim(PrimOp.DECODING, ["kv"], ["items"], max_tokens=7, split="list")
    assert collect_outputs(split, [d], [{"text": "1. a\n2. b", "items": ["a", "b"]}]) == {"items": ["a", "b"]}


def test_tool_calls_parse_and_check_allowed():
    p = prim(PrimOp.TOOL, ["calls"], map=("calls",), allowed=["calc"])
    assert build_requests(p, {"calls": ['{"tool": "calc", "args": {"x": 1}}']}) == [
        {"tool": "calc", "args": {"x": 1}}
    ]
    with pytest.raises(PrimitiveInputError, match="'rm' is not allowed"):
        build_requests(p, {"calls": [{"tool": "rm", "args": {}}]})
    with pytest.raises(PrimitiveInputError, match="not valid JSON"):
        build_requests(p, {"calls": ["{nope"]})


def test_condition_predicates():
    c = prim(PrimOp.CONDITION, ["t"], ["b"], predicate="contains", value="YES", case_sensitive=False)
    assert run_control(c, {"t": "answer: yes"}) == {"b": True}
    c.args["case_sensitive"] = True
    assert run_control(c, {"t": "answer: yes"}) == {"b": False}
    n = prim(PrimOp.CONDITION, ["t"], ["b"], predicate="not_contains", value="x")
    assert run_control(n, {"t": "abc"}) == {"b": True}
    e = prim(PrimOp.CONDITION, ["t"], ["b"], predicate="equals", value="ok")
    assert run_control(e, {"t": " OK \n"}) == {"b": True}


def test_aggregate_modes():
    values = {"a": [1, 2], "b": [3], "s": "x", "t": "y"}
    assert run_control(prim(PrimOp.AGGREGATE, ["a", "b"], mode="concat"), values) == {"out": [1, 2, 3]}
    assert run_control(prim(PrimOp.AGGREGATE, ["s", "t"], mode="join"), values) == {"out": "x\n\ny"}
    assert run_control(prim(PrimOp.AGGREGATE, ["s", "t"], mode="first"), values, {"s"}) == {"out": "y"}


def test_skipping():
    guarded = prim(PrimOp.EMBEDDING, ["x", "branch"], guard="branch")
    assert is_skipped(guarded, {"branch": False}, set())
    assert not is_skipped(guarded, {"branch": True}, set())
    reader = prim(PrimOp.EMBEDDING, ["x"])
    assert is_skipped(reader, {}, {"x"})
    first = prim(PrimOp.AGGREGATE, ["x", "y"], mode="first")
    assert not is_skipped(first, {}, {"x"})
    assert is_skipped(first, {}, {"x", "y"})
    concat = prim(PrimOp.AGGREGATE, ["x", "y"], mode="concat")
    assert is_skipped(concat, {}, {"x"})


def test_split_decode_asks_for_its_items_and_keeps_no_more():
    d = prim(PrimOp.DECODING, ["x.kv"], outputs=("x.items",), split="list", n_items=3, max_tokens=64)
    [req] = build_requests(d, {"x.kv": {"parts": [["q", "list"]]}})
    assert req["split"] == "list" and req["max_items"] == 3
    out = collect_outputs(d, [req], [{"text": "a\nb\nc\nd", "items": ["a", "b", "c", "d"]}])
    assert out == {"x.items": ["a", "b", "c"]}
    plain = prim(PrimOp.DECODING, ["x.kv"], outputs=("x.text",), max_tokens=8)
    assert "max_items" not in build_requests(plain, {"x.kv": {"parts": [["q", "hi"]]}})[0]
