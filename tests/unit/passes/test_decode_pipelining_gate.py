"""Pass decode_pipelining's gate (teola.passes.decode_pipelining_cost): a splittable decode is
streamed into items only where the engine's costs predict that its readers overlap more decode than
the requests the split adds."""
import dataclasses

import pytest

from engines.llm_text.costs import EngineCosts
from teola import PrimOp, Ref
from teola.passes import get_pass
from teola.passes.decode_pipelining_cost import predicted_gain
from tests.factories import make_graph

P, D, E = PrimOp.PREFILLING, PrimOp.DECODING, PrimOp.EMBEDDING
COSTS = EngineCosts(request_s=0.06, prefill_token_s=0.003, decode_step_s=0.035, block_size=32, source="test")


def expansion(reader: PrimOp = E, costs: EngineCosts | None = None, n_items: int = 3, max_tokens: int = 72):
    """An expansion call of `n_items` items whose reader maps over them."""
    g = make_graph((P, ("query.question",), ("x.kv",)), (D, ("x.kv",), ("x.items",)),
                   (reader, ("x.items",), ("y.out",)),
                   p0={"parts": [("q", Ref("query.question"))]},
                   p1={"splittable": True, "split": "list", "n_items": n_items, "max_tokens": max_tokens},
                   p2={"map": ("x.items",), "n": n_items, **({"parts": [("x", Ref("x.items"))]} if reader == P else {})})
    g.outputs = ("y.out",)
    if costs is not None:
        g.engines["llm"] = dataclasses.replace(g.engines["llm"], costs=costs)
    return g


def test_the_predicted_gain_is_the_decode_the_first_items_readers_overlap_less_their_requests():
    # 72 tokens x 35 ms, two thirds of it after the first item: 1.68 s
    assert predicted_gain(72, 3, COSTS, 0.0) == pytest.approx(72 * 0.035 * 2 / 3)
    assert predicted_gain(72, 3, COSTS, 0.06) == pytest.approx(72 * 0.035 * 2 / 3 - 2 * 0.06)
    assert predicted_gain(72, 1, COSTS, 0.0) == 0.0  # one item: nothing overlaps


def test_known_costs_decide_and_the_decision_is_in_the_graphs_text():
    r = get_pass("decode_pipelining")(expansion(costs=COSTS))
    assert r.modified and len(r.graph.find(PrimOp.PARTIAL_DECODING)) == 3
    assert "# gate decode_pipelining c1: pipelined, predicted gain +1680 ms (test)" in r.graph.to_text()
    free = dataclasses.replace(COSTS, decode_step_s=0.0)
    r = get_pass("decode_pipelining")(expansion(costs=free))
    assert not r.modified and "kept whole, predicted gain +0 ms" in r.graph.to_text()


def test_an_llm_reader_split_per_item_pays_its_requests():
    # readers that are LLM calls on the same engine: 2 more requests of 1 s each outweigh 0.84 s of overlap
    slow_requests = dataclasses.replace(COSTS, request_s=1.0)
    r = get_pass("decode_pipelining")(expansion(reader=P, costs=slow_requests, max_tokens=36))
    assert not r.modified
    assert r.graph.gates == {"decode_pipelining c1": "kept whole, predicted gain -1160 ms (test)"}


def test_without_costs_or_with_the_gate_off_every_splittable_decode_is_split():
    assert get_pass("decode_pipelining")(expansion()).modified
    assert get_pass("decode_pipelining")(expansion()).graph.gates == {}
    free = dataclasses.replace(COSTS, decode_step_s=0.0)
    assert get_pass("decode_pipelining")(expansion(costs=free), gate=False).modified
    # a profile named in the options decides without the engine's costs
    assert get_pass("decode_pipelining")(expansion(), profile="cpu-smollm2-135m").modified
    assert not get_pass("decode_pipelining")(expansion(n_items=1), profile="cpu-smollm2-135m").modified
