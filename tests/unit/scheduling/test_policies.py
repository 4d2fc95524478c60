"""Every batching policy's schedule() on hand-built queues (pure logic, no engines)."""

import pytest

from teola.scheduling.registry import (
    Decision,
    Filler,
    Limits,
    Pick,
    Policy,
    RequestQueue,
    make_policy,
    policy_names,
    register_policy,
    unregister_policy,
)
from tests.factories import pending


def entry(qid, name, depth, arrival, n=1, op="prefilling", tokens=None):
    reqs = [{"i": i} for i in range(n)]
    return pending(qid, name, arrival, reqs, op, depth, tokens=[tokens] * n if tokens else None)


def picked(d: Decision):
    return [(p.entry.name, p.count) for p in d.picks]


LLM = Limits(max_batch=32, max_efficient_batch=8, token_budget=1024)


def figure7_queue():
    """Teola Fig. 7: query 1 has A (deep: its children lead on) and B (shallow: B's child E also
    waits for an untriggered D); query 2 has G (shallow) and H (deep). Each prefill is 512 tokens
    and the instance holds 1024."""
    return RequestQueue(
        [
            entry("q1", "A", 3, 0.0, tokens=512),
            entry("q1", "B", 1, 0.1, tokens=512),
            entry("q2", "G", 1, 0.2, tokens=512),
            entry("q2", "H", 2, 0.3, tokens=512),
        ]
    )


def test_figure7_topology_batches_A_with_H():
    d = make_policy("topology").schedule(figure7_queue(), 1.0, LLM)
    assert picked(d) == [("A", 1), ("H", 1)]


def test_figure7_blind_batching_takes_A_with_B():
    d = make_policy("fifo").schedule(figure7_queue(), 1.0, LLM)
    assert picked(d) == [("A", 1), ("B", 1)]


def test_schedule_does_not_mutate_the_queue():
    q = figure7_queue()
    for name in policy_names():
        make_policy(name).schedule(q, 10.0, LLM)
    assert len(q) == 4
    assert [e.taken for e in q] == [0, 0, 0, 0]


# ---- fifo ---------------------------------------------------------------------------------------
def test_fifo_dispatches_a_full_batch_at_once():
    q = RequestQueue(
        [entry("q1", "a", 0, 0.0, n=3, op="embedding"), entry("q2", "b", 5, 0.001, n=3, op="embedding")]
    )
    d = make_policy("fifo", timeout=1.0).schedule(q, 0.002, Limits(max_batch=4, max_efficient_batch=2))
    assert picked(d) == [("a", 3), ("b", 1)]


def test_fifo_waits_for_more_until_the_timeout():
    q = RequestQueue([entry("q1", "a", 0, 0.0, n=2, op="embedding")])
    pol = make_policy("fifo", timeout=0.5)
    d = pol.schedule(q, 0.1, Limits(max_batch=4, max_efficient_batch=2))
    assert d.picks == [] and d.wait_until == pytest.approx(0.5)
    assert picked(pol.schedule(q, 0.5, Limits(max_batch=4, max_efficient_batch=2))) == [("a", 2)]


def test_fifo_batches_one_op_the_oldest():
    q = RequestQueue(
        [
            entry("q1", "pre", 0, 0.0, op="prefilling"),
            entry("q1", "dec", 0, 0.1, op="decoding"),
            entry("q2", "pre2", 0, 0.2, op="prefilling"),
        ]
    )
    d = make_policy("fifo", timeout=0.0).schedule(q, 1.0, Limits(max_batch=8, max_efficient_batch=8))
    assert picked(d) == [("pre", 1), ("pre2", 1)]


def test_fifo_continues_a_partly_taken_entry():
    e = entry("q1", "a", 0, 0.0, n=5, op="embedding")
    e.taken = 3
    d = make_policy("fifo", timeout=0.0).schedule(
        RequestQueue([e]), 1.0, Limits(max_batch=8, max_efficient_batch=8)
    )
    assert picked(d) == [("a", 2)]


def test_fifo_respects_the_token_budget():
    q = RequestQueue([entry("q1", "a", 0, 0.0, tokens=600), entry("q2", "b", 0, 0.1, tokens=600)])
    d = make_policy("fifo", timeout=10.0).schedule(q, 0.2, LLM)
    assert picked(d) == [("a", 1)]  # full by tokens: dispatched without waiting


def test_a_request_larger_than_the_budget_still_runs_alone():
    f = Filler(8, 100)
    e = entry("q1", "big", 0, 0.0, n=2, tokens=500)
    assert f.take(e) == 1 and f.full


def test_each_request_takes_the_engines_headroom_beyond_its_charge():
    # two requests charged 40 tokens each in a budget of 100: both fit as charged (80), but with the
    # engine's 32-token block reported each holds 16 more than the 16-token headroom it was charged
    assert Filler(8, 100).take(entry("q1", "c", 0, 0.0, n=2, tokens=40)) == 2
    f = Filler(8, 100, headroom=16)
    assert f.take(entry("q1", "c", 0, 0.0, n=2, tokens=40)) == 1 and f.full and f.tokens == 44
    queue = RequestQueue([entry("q1", "c", 0, 0.0, n=2, tokens=40, op="decoding")])
    limits = Limits(max_batch=8, max_efficient_batch=8, token_budget=100, headroom=16)
    assert picked(make_policy("plas").schedule(queue, 0.0, limits)) == [("c", 1)]


# ---- po -----------------------------------------------------------------------------------------
def test_po_takes_one_primitive_at_a_time():
    q = RequestQueue(
        [entry("q1", "a", 0, 0.0, n=3, op="embedding"), entry("q2", "b", 9, 0.1, n=3, op="embedding")]
    )
    d = make_policy("po").schedule(q, 0.0, Limits(max_batch=16, max_efficient_batch=8))
    assert picked(d) == [("a", 3)] and d.wait_until is None


def test_po_splits_a_primitive_larger_than_max_batch():
    q = RequestQueue([entry("q1", "a", 0, 0.0, n=40, op="embedding")])
    assert picked(make_policy("po").schedule(q, 0.0, Limits(max_batch=16, max_efficient_batch=8))) == [
        ("a", 16)
    ]


# ---- to -----------------------------------------------------------------------------------------
def test_to_fills_the_max_efficient_batch_not_more():
    q = RequestQueue(
        [entry("q1", "a", 0, 0.0, n=5, op="embedding"), entry("q2", "b", 0, 0.0, n=5, op="embedding")]
    )
    d = make_policy("to").schedule(q, 0.0, Limits(max_batch=32, max_efficient_batch=8))
    assert picked(d) == [("a", 5), ("b", 3)]


def test_to_waits_for_the_efficient_batch_or_timeout():
    q = RequestQueue([entry("q1", "a", 0, 0.0, n=3, op="embedding")])
    pol = make_policy("to", timeout=0.05)
    d = pol.schedule(q, 0.01, Limits(max_batch=32, max_efficient_batch=8))
    assert d.picks == [] and d.wait_until == pytest.approx(0.05)
    assert picked(pol.schedule(q, 0.06, Limits(max_batch=32, max_efficient_batch=8))) == [("a", 3)]


# ---- topology -----------------------------------------------------------------------------------
def test_topology_buckets_by_earliest_arrival_and_takes_the_deepest():
    q = RequestQueue(
        [
            entry("q2", "x", 1, 0.5, op="embedding"),
            entry("q1", "y", 4, 0.6, op="embedding"),
            entry("q2", "z", 3, 0.7, op="embedding"),
            entry("q1", "w", 4, 0.8, op="embedding"),
        ]
    )
    d = make_policy("topology").schedule(q, 1.0, Limits(max_batch=32, max_efficient_batch=8))
    # bucket q2 arrived first (0.5): its deepest is z; bucket q1: both y and w have depth 4
    assert picked(d) == [("z", 1), ("y", 1), ("w", 1)]


def test_topology_fills_max_efficient_batch_slots():
    q = RequestQueue(
        [entry("q1", "a", 2, 0.0, n=6, op="embedding"), entry("q2", "b", 2, 0.1, n=6, op="embedding")]
    )
    d = make_policy("topology").schedule(q, 1.0, Limits(max_batch=32, max_efficient_batch=8))
    assert picked(d) == [("a", 6), ("b", 2)]


def test_topology_never_waits():
    d = make_policy("topology").schedule(RequestQueue([entry("q1", "a", 0, 0.0)]), 0.0, LLM)
    assert picked(d) == [("a", 1)] and d.wait_until is None


def test_topology_keeps_one_op_per_batch():
    q = RequestQueue(
        [
            entry("q1", "dec", 5, 0.0, op="decoding"),
            entry("q2", "pre", 7, 0.1, op="prefilling"),
            entry("q2", "dec2", 1, 0.2, op="decoding"),
        ]
    )
    d = make_policy("topology").schedule(q, 1.0, LLM)
    assert picked(d) == [("dec", 1), ("dec2", 1)]


def test_empty_queue_gives_an_empty_decision():
    for name in policy_names():
        d = make_policy(name).schedule(RequestQueue(), 0.0, LLM)
        assert d.picks == [] and d.wait_until is None


# ---- registry -----------------------------------------------------------------------------------
def test_unknown_policy_names_the_known_ones():
    with pytest.raises(ValueError, match=r"known policies: .*fifo.*po.*to.*topology"):
        make_policy("lifo")


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="timeout"):
        make_policy("fifo", timeout=-1)


def test_register_a_policy():
    class Newest(Policy):
        name = "newest"

        def schedule(self, queue, now, limits):
            return Decision(picks=[Pick(entry=list(queue)[-1], count=1, priority=0)]) if queue else Decision()

    register_policy("newest", Newest)
    try:
        d = make_policy("newest").schedule(figure7_queue(), 0.0, LLM)
        assert picked(d) == [("H", 1)] and d.picks[0].priority == 0
    finally:
        unregister_policy("newest")
    assert "newest" not in policy_names()


def test_a_registered_policy_must_subclass_policy_and_define_schedule():
    class Duck:
        name = "duck"

        def schedule(self, queue, now, limits):
            return Decision()

    class NoSchedule(Policy):
        name = "empty"

    register_policy("duck", Duck)
    try:
        with pytest.raises(TypeError, match="subclass"):
            make_policy("duck")
    finally:
        unregister_policy("duck")
    with pytest.raises(TypeError, match="schedule"):
        NoSchedule()


def test_queue_buckets_follow_the_earliest_remaining_arrival():
    a, b, c = entry("q1", "a", 2, 0.0), entry("q2", "b", 1, 0.1), entry("q1", "c", 1, 0.2)
    q = RequestQueue([a, b, c])
    assert [[e.name for e in bk] for bk in q.buckets()] == [["a", "c"], ["b"]]
    assert q.discard(a) and not q.discard(a)
    assert [[e.name for e in bk] for bk in q.buckets()] == [["b"], ["c"]]  # q1's earliest is now 0.2
    assert [e.name for e in q] == ["b", "c"] and q.first() is b and len(q) == 2


def test_a_bucket_whose_oldest_leaves_stays_ahead_of_younger_queries():
    # Algorithm 2, line 9: q1 still holds an entry (0.1) older than q2's (0.3): it stays first
    a, b, c = entry("q1", "a", 2, 0.0), entry("q1", "b", 1, 0.1), entry("q2", "c", 1, 0.3)
    q = RequestQueue([a, b, c])
    q.discard(a)
    assert [[e.name for e in bk] for bk in q.buckets()] == [["b"], ["c"]]
    q.push(a)  # re-queued (a preempted call keeps its arrival): back at the head of its bucket
    assert [[e.name for e in bk] for bk in q.buckets()] == [["a", "b"], ["c"]]
