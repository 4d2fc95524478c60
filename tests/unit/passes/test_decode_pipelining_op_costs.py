"""Pass decode_pipelining's gate on readers of non-LLM engines: a profile named in the pass's
options first, else the op costs the reader's engine reported at start (`EngineInfo.op_costs`),
else none (named in the gate line); a fit with error over MAX_FIT_ERROR is not used."""

import dataclasses

import pytest

from engines.llm_text.costs import FITTED
from engines.machine.op_costs import OpCost
from teola import PrimOp
from teola.passes import get_pass
from teola.passes.decode_pipelining import reader_work
from teola.passes.decode_pipelining_cost import predicted_gain
from teola.passes.engine_costs import op_cost_for, profile_op_cost
from tests.unit.passes.test_decode_pipelining_gate import COSTS, CPU, expansion

D, E, S = PrimOp.DECODING, PrimOp.EMBEDDING, PrimOp.SEARCHING
EMB = OpCost(base_s=0.010, item_s=0.002, source=FITTED, error=0.04)  # 12 ms for one item's request
DB = OpCost(base_s=0.001, item_s=0.0005, source=FITTED, error=0.02)


def reported(g, emb: OpCost | None = EMB, db: OpCost | None = None):
    """`g` with the op costs its embedder and vector store reported at start."""
    if emb is not None:
        g.engines["emb"] = dataclasses.replace(g.engines["emb"], op_costs={E: emb})
    if db is not None:
        g.engines["db"] = dataclasses.replace(g.engines["db"], op_costs={S: db})
    return g


def test_a_reported_reader_cost_adds_n_minus_1_times_its_item_cost_to_the_gain():
    # 3 items: the 2 first embeddings (12 ms each) overlap the decode left (1.68 s) and add 2 requests
    # of 10 ms: +24 - 20 = +4 ms, against +0 ms for a reader of unknown cost
    g = reported(expansion(costs=COSTS))
    work = reader_work(g, g.find(D)[0], 24, None)
    assert work.item_s == pytest.approx(0.012) and work.request_s == pytest.approx(0.010)
    assert work.unknown == [] and work.untrusted == []
    gain = predicted_gain(72, 3, COSTS, work)
    assert gain == pytest.approx(2 * 0.012 - 2 * 0.010)
    assert gain - predicted_gain(72, 3, COSTS, reader_work(expansion(), g.find(D)[0], 24, None)) == (
        pytest.approx((3 - 1) * EMB.item_s)
    )
    r = get_pass("decode_pipelining")(g)
    assert r.modified and r.graph.gates == {"decode_pipelining c1": "pipelined, predicted gain +4 ms (test)"}


def test_each_reader_of_the_chain_is_charged_and_one_without_costs_is_named():
    g = reported(expansion(costs=COSTS, search=True), db=DB)
    work = reader_work(g, g.find(D)[0], 24, None)
    assert work.item_s == pytest.approx(0.012 + 0.0015) and work.request_s == pytest.approx(0.011)
    r = get_pass("decode_pipelining")(g)
    assert r.graph.gates == {"decode_pipelining c1": "pipelined, predicted gain +5 ms (test)"}  # 2 x 2.5 ms
    r = get_pass("decode_pipelining")(reported(expansion(costs=COSTS, search=True)))
    assert r.graph.gates == {
        "decode_pipelining c1": "pipelined, predicted gain +4 ms (test); no costs for c3"
    }


def test_a_profile_named_in_the_pass_options_comes_before_the_reported_costs():
    g = reported(expansion(costs=COSTS, search=True), db=DB)
    emb, db = profile_op_cost(CPU, "sentence_transformers", E), profile_op_cost(CPU, "pgvector", S)
    assert emb is not None and db is not None
    named = op_cost_for(g, "emb", E, CPU)
    assert named is not None and (named.base_s, named.item_s, named.source) == (*emb, CPU)
    work = reader_work(g, g.find(D)[0], 24, CPU)
    assert work.item_s == pytest.approx(sum(emb) + sum(db)) and work.request_s == pytest.approx(
        emb[0] + db[0]
    )
    # a profile without the reader's kind: the engine's reported costs
    other = reported(expansion(costs=COSTS))
    other.engines["emb"] = dataclasses.replace(other.engines["emb"], kind="st")
    assert op_cost_for(other, "emb", E, CPU) == EMB and op_cost_for(other, "db", S, None) is None


def test_a_poor_fit_is_not_used_and_the_gate_line_says_why():
    poor = dataclasses.replace(EMB, error=0.15)
    g = reported(expansion(costs=COSTS), emb=poor)
    r = get_pass("decode_pipelining")(g)
    assert not r.modified
    assert r.graph.gates == {
        "decode_pipelining c1": (
            "kept whole, predicted gain +0 ms (test); costs not used for c2 (fit error 15% over 10%)"
        )
    }
    profiled = dataclasses.replace(EMB, source=CPU, error=0.15)  # a profile's costs are not a fit
    assert get_pass("decode_pipelining")(reported(expansion(costs=COSTS), emb=profiled)).modified
