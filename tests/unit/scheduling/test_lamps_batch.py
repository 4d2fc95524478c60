"""LAMPS Algorithm 1's running batch (issue 73 item 3) against hand-computed scores: running calls
are ranked by their remaining work beside the waiting ones and preempted when no slot is free and a
better call waits; C_other is the running batch's context. Scores of calls without an API call:
memory over time = pre x prompt + pre x (pre + 1) / 2 (teola.scheduling.program.api_handling)."""

from __future__ import annotations

import pytest

from teola.scheduling.base import Limits, Pending, Pick, RequestQueue
from teola.scheduling.registry import make_policy


def entry(name: str, max_tokens: int, prompt: int = 10) -> Pending:
    return Pending(
        query_id=name,
        name=name,
        op="decoding",
        depth=0,
        arrival=0.0,
        requests=[{"max_tokens": max_tokens}],
        tokens=[prompt + max_tokens],
    )


def admit(policy, e: Pending) -> None:
    [pick] = policy.schedule(RequestQueue([e]), 0.0, Limits(max_batch=1, max_efficient_batch=1)).picks
    assert pick.entry is e


def test_a_better_waiting_call_preempts_the_running_one_only_when_no_slot_is_free():
    """L (prompt 10, 100 tokens) runs and has decoded 10: remaining prompt 20, pre 90 ->
    90 x 20 + 90 x 91 / 2 = 5,895. S (prompt 10, 5 tokens): 5 x 10 + 15 = 65 < 5,895: it preempts L
    when no slot is free, not when one is. B (200 tokens): 200 x 10 + 20,100 = 22,100: it does not."""
    lamps = make_policy("lamps")
    long = entry("L", 100)
    admit(lamps, long)
    lamps.progress(long, 10)
    assert lamps.running_score(long) == 5895
    assert lamps.victims([long], [entry("S", 5)], 0, 0.0) == [long]
    assert lamps.victims([long], [entry("S2", 5)], 1, 0.0) == []
    assert lamps.victims([long], [entry("B", 200)], 0, 0.0) == []
    assert make_policy("lamps", preempt=False).victims([long], [entry("S3", 5)], 0, 0.0) == []


def test_a_running_call_near_its_end_is_ranked_by_what_it_has_left():
    """L has decoded 95 of 100: prompt 105, pre 5 -> 5 x 105 + 15 = 540. A waiting call of 20 tokens
    (20 x 10 + 210 = 410) preempts it; one of 25 tokens (25 x 10 + 325 = 575) does not, though at
    admission L scored 100 x 10 + 5,050 = 6,050."""
    lamps = make_policy("lamps")
    long = entry("L", 100)
    admit(lamps, long)
    lamps.progress(long, 95)
    assert lamps.running_score(long) == 540
    assert lamps.victims([long], [entry("W20", 20)], 0, 0.0) == [long]
    assert lamps.victims([long], [entry("W25", 25)], 0, 0.0) == []


def test_c_other_is_the_running_batchs_context_by_default():
    """A (prompt 10 + 100 tokens = 110) and B (50 + 30 = 80) run: C_other = 190; once A ends, 80;
    once B is preempted, 0. With batch_size=None it stays 0."""
    lamps = make_policy("lamps")
    a, b = entry("A", 100), entry("B", 30, prompt=50)
    picks = lamps.schedule(RequestQueue([a, b]), 0.0, Limits(max_batch=2, max_efficient_batch=2)).picks
    assert lamps.other_context() == 190
    lamps.observe([p for p in picks if p.entry is a], 0.0, 1.0, [{"num_output_tokens": 100}])
    assert lamps.other_context() == 80
    lamps.preempted(Pick(entry=b, count=1))
    assert lamps.other_context() == 0
    alone = make_policy("lamps", batch_size=None)
    alone.schedule(RequestQueue([entry("C", 100)]), 0.0, Limits(max_batch=1, max_efficient_batch=1))
    assert alone.other_context() == 0


def test_the_batch_check_interval_is_an_option():
    assert make_policy("lamps").rerank_every == 1  # every progress event: every engine iteration
    assert make_policy("lamps", rerank_every=8).rerank_every == 8
    with pytest.raises(ValueError, match="rerank_every"):
        make_policy("lamps", rerank_every=0)
