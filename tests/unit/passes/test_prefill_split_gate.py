"""Pass prefill_split's gate (teola.passes.prefill_split_cost): a partial prefill is made only where
the engine's known costs predict that it saves more prefill than the request it adds."""

import dataclasses

import pytest

from engines.llm_text.costs import FITTED, EngineCosts
from teola import PrimOp, Ref
from teola.passes import get_pass
from teola.passes.engine_costs import profile_costs
from teola.passes.prefill_split_cost import predicted_gain
from tests.factories import make_graph

P, D, E = PrimOp.PREFILLING, PrimOp.DECODING, PrimOp.EMBEDDING
COSTS = EngineCosts(request_s=0.06, prefill_token_s=0.003, block_size=32, source="test")


def rag_call(prefix: list) -> object:
    """A retrieval feeding one synthesis call whose prompt is `prefix`, then the retrieved context."""
    parts = [*prefix, ("context", Ref("r.ctx"))]
    return make_graph(
        (E, ("query.question",), ("r.ctx",)),
        (P, ("query.question", "r.ctx"), ("s.kv",)),
        (D, ("s.kv",), ("s.text",)),
        p0={"map": ("query.question",)},
        p1={"parts": parts},
    )


def test_a_constant_prefix_is_never_split_it_was_cached_by_the_call_before():
    g = rag_call([("context_label", "Context:\n----------")])
    assert not get_pass("prefill_split")(g).modified
    r = get_pass("prefill_split")(g, gate=False)  # the split before the gate
    assert r.modified and len(r.graph.find(PrimOp.PARTIAL_PREFILLING)) == 1
    assert predicted_gain([("label", "x" * 4000)], COSTS, 16) == -0.06


def test_with_an_engine_profile_a_prefix_splits_only_when_its_new_blocks_outweigh_the_request():
    short = [("instruction", "Answer."), ("question", Ref("query.question"))]
    # ~2 + 16 tokens: no whole block of the question is cached, so the request is all cost
    assert predicted_gain(short, COSTS, 16) == pytest.approx(-0.06)
    # ~2 + 100 tokens: 3 new blocks of 32 tokens, 96 * 3 ms = 288 ms saved for 60 ms
    assert predicted_gain(short, COSTS, 100) == pytest.approx(96 * 0.003 - 0.06)
    # a constant lead of 40 tokens fills one block the previous call cached: only the rest counts
    lead = [("instruction", "x" * 160), ("question", Ref("query.question"))]
    assert predicted_gain(lead, COSTS, 30) == pytest.approx(32 * 0.003 - 0.06)  # 70 tokens: blocks 2 - 1
    g = rag_call(short)
    assert get_pass("prefill_split")(g).modified  # no costs known: a prefix with query data splits
    assert not get_pass("prefill_split")(g, profile="cpu-smollm2-135m").modified
    assert get_pass("prefill_split")(g, profile="cpu-smollm2-135m", ref_tokens=200).modified


def test_the_shipped_cpu_profile_gives_the_costs_it_was_measured_with():
    c = profile_costs("cpu-smollm2-135m")
    assert c.block_size == 32 and 0 < c.prefill_token_s < c.request_s
    with pytest.raises(ValueError, match="profile .no-such-profile. gives no vllm costs"):
        profile_costs("no-such-profile")


def test_a_poorly_fitted_engine_splits_nothing_and_says_why():
    g = rag_call([("instruction", "Answer."), ("question", Ref("query.question"))])
    for error, splits in ((0.15, False), (0.05, True)):
        fitted = dataclasses.replace(COSTS, source=FITTED, error=error, block_size=8, prefill_token_s=0.03)
        g.engines["llm"] = dataclasses.replace(g.engines["llm"], costs=fitted)
        r = get_pass("prefill_split")(g)
        assert (
            r.modified == splits
        )  # a good fit: 2 new blocks of 8 tokens at 30 ms = 480 ms > the 60 ms request
    poor = dataclasses.replace(COSTS, source=FITTED, error=0.15)
    g.engines["llm"] = dataclasses.replace(g.engines["llm"], costs=poor)
    assert get_pass("prefill_split")(g).graph.gates == {
        "prefill_split c1": "kept whole, costs not used (fitted at start, fit error 15% over 10%)"
    }
