"""Pass decode_pipelining's gate (teola.passes.decode_pipelining_cost): a splittable decode is
streamed into items only where the costs predict that the first items' reader work, overlapped with
the rest of the decode, outweighs the requests the split adds."""

import dataclasses

import pytest

from engines.llm_text.costs import FITTED, EngineCosts
from teola import PrimOp, Ref
from teola.passes import get_pass
from teola.passes.decode_pipelining import reader_work
from teola.passes.decode_pipelining_cost import ReaderWork, predicted_gain
from teola.passes.engine_costs import profile_costs, profile_op_cost
from tests.factories import make_graph

P, D, E, S = PrimOp.PREFILLING, PrimOp.DECODING, PrimOp.EMBEDDING, PrimOp.SEARCHING
COSTS = EngineCosts(request_s=0.06, prefill_token_s=0.003, decode_step_s=0.035, block_size=32, source="test")
CPU = "cpu-smollm2-135m"


def expansion(
    reader: PrimOp = E,
    costs: EngineCosts | None = None,
    n_items: int = 3,
    max_tokens: int = 72,
    search: bool = False,
):
    """An expansion call of `n_items` items whose reader maps over them (then a search mapping over
    the reader's output, with `search`); engines of the kinds the shipped profiles name."""
    specs = [
        (P, ("query.question",), ("x.kv",)),
        (D, ("x.kv",), ("x.items",)),
        (reader, ("x.items",), ("y.out",)),
    ]
    args = {
        "p0": {"parts": [("q", Ref("query.question"))]},
        "p1": {"splittable": True, "split": "list", "n_items": n_items, "max_tokens": max_tokens},
        "p2": {
            "map": ("x.items",),
            "n": n_items,
            **({"parts": [("x", Ref("x.items"))]} if reader == P else {}),
        },
    }
    if search:
        specs.append((S, ("y.out",), ("z.hits",)))
        args["p3"] = {"map": ("y.out",), "n": n_items}
    g = make_graph(*specs, **args)
    g.engines["emb"] = dataclasses.replace(g.engines["emb"], kind="sentence_transformers")
    if costs is not None:
        g.engines["llm"] = dataclasses.replace(g.engines["llm"], costs=costs)
    return g


def test_the_gain_is_the_first_items_reader_work_at_most_the_decode_left_less_their_requests():
    window = 72 * 0.035 * 2 / 3  # 1.68 s of decode after the first of 3 items
    short = ReaderWork(item_s=0.5, request_s=0.06)
    assert predicted_gain(72, 3, COSTS, short) == pytest.approx(
        2 * 0.5 - 2 * 0.06
    )  # 0.88 s: the readers bound it
    long = ReaderWork(item_s=2.0, request_s=0.06)
    assert predicted_gain(72, 3, COSTS, long) == pytest.approx(
        window - 2 * 0.06
    )  # 1.56 s: the decode bounds it
    assert predicted_gain(72, 1, COSTS, short) == -0.06  # one item: nothing overlaps, its request is lost
    assert predicted_gain(72, 3, COSTS, ReaderWork()) == 0.0  # readers of unknown cost: no overlap claimed


def test_readers_without_costs_are_no_work_so_the_decode_is_kept_whole_and_named():
    r = get_pass("decode_pipelining")(expansion(costs=COSTS))
    assert not r.modified and not r.graph.find(PrimOp.PARTIAL_DECODING)
    assert r.graph.gates == {
        "decode_pipelining c1": "kept whole, predicted gain +0 ms (test); no costs for c2"
    }


def test_an_llm_reader_is_charged_its_request_its_items_prefill_and_its_requests():
    # each reader prefills one item: 72 // 3 = 24 tokens (the item's share of the output) at 3 ms + 60 ms
    r = get_pass("decode_pipelining")(expansion(reader=P, costs=COSTS))
    item_s = 0.06 + 24 * 0.003  # 0.132 s; two items overlap 0.264 s of the 1.68 s left, less 2 requests
    assert r.modified and len(r.graph.find(PrimOp.PARTIAL_DECODING)) == 3
    assert r.graph.gates["decode_pipelining c1"] == (
        f"pipelined, predicted gain +{(2 * item_s - 2 * 0.06) * 1e3:.0f} ms (test)"
    )  # +144 ms
    # 2 more requests of 1 s each outweigh what 36 tokens leave to overlap (0.84 s)
    slow_requests = dataclasses.replace(COSTS, request_s=1.0)
    r = get_pass("decode_pipelining")(expansion(reader=P, costs=slow_requests, max_tokens=36))
    assert not r.modified
    assert r.graph.gates == {"decode_pipelining c1": "kept whole, predicted gain -1160 ms (test)"}


def test_a_named_profile_charges_each_reader_along_the_chain_its_op_cost():
    emb, db = profile_op_cost(CPU, "sentence_transformers", E), profile_op_cost(CPU, "pgvector", S)
    assert emb is not None and db is not None and emb[0] > 0 and db[0] > 0
    g = expansion(search=True)
    work = reader_work(g, g.find(D)[0], 24, CPU)
    assert work.item_s == pytest.approx(emb[0] + emb[1] + db[0] + db[1])  # the embedding, then the search
    assert work.request_s == pytest.approx(emb[0] + db[0]) and work.unknown == []
    r = get_pass("decode_pipelining")(expansion(search=True), profile=CPU)
    gain = 2 * (emb[1] + db[1])  # the per-item parts: each extra request pays its base
    assert gain < profile_costs(CPU).decode_step_s * 72 * 2 / 3
    assert r.modified == (gain > 0)
    assert r.graph.gates["decode_pipelining c1"] == f"pipelined, predicted gain +{gain * 1e3:.0f} ms ({CPU})"


def test_a_poorly_fitted_engine_keeps_the_decode_whole_and_says_why():
    poor = dataclasses.replace(COSTS, source=FITTED, error=0.15)
    r = get_pass("decode_pipelining")(expansion(reader=P, costs=poor))
    assert not r.modified
    assert r.graph.gates == {
        "decode_pipelining c1": "kept whole, costs not used (fitted at start, fit error 15% over 10%)"
    }
    good = dataclasses.replace(COSTS, source=FITTED, error=0.05)
    assert get_pass("decode_pipelining")(expansion(reader=P, costs=good)).modified


def test_without_costs_or_with_the_gate_off_every_splittable_decode_is_split():
    assert get_pass("decode_pipelining")(expansion()).modified
    assert get_pass("decode_pipelining")(expansion()).graph.gates == {}
    free = dataclasses.replace(COSTS, decode_step_s=0.0)
    assert get_pass("decode_pipelining")(expansion(costs=free), gate=False).modified
    assert not get_pass("decode_pipelining")(expansion(n_items=1), profile=CPU).modified
