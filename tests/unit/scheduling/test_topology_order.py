"""The bucket order of topology-aware batching (teola.scheduling.primitive.topology, option `order`):
"query" (the default) visits queries by their start, "entry" by their oldest queued entry (Algorithm 2
line 9)."""

import pytest

from teola.scheduling.registry import Limits, RequestQueue, make_policy
from tests.factories import pending


def entry(qid, name, arrival, started, n=1, op="embedding", depth=3):
    return pending(
        qid, name, arrival, [{"text": f"{name} {i}"} for i in range(n)], op, depth, query_arrival=started
    )


def first_batch(queue, **options):
    lim = Limits(max_batch=4, max_efficient_batch=4)
    d = make_policy("topology", **options).schedule(RequestQueue(queue), 3.0, lim)
    return [(p.entry.name, p.count) for p in d.picks]


def queue():
    # q2 started later but queued its indexing slice first; q1's query embedding became ready after it
    return [entry("q2", "index2", 1.0, 0.5, n=4, depth=4), entry("q1", "embed1", 2.0, 0.0)]


def test_by_entry_the_earlier_queued_slice_goes_first():
    assert first_batch(queue(), order="entry") == [("index2", 4)]


def test_by_query_the_older_query_goes_first_by_default():
    # q1's bucket first (started at 0.0); its 1 request leaves 3 slots, filled from q2 (no op costs)
    assert first_batch(queue(), order="query") == [("embed1", 1), ("index2", 3)]
    assert first_batch(queue()) == [("embed1", 1), ("index2", 3)]


def test_queries_that_started_together_keep_the_entry_order():
    q = [entry("q2", "b", 1.0, 0.0), entry("q1", "a", 2.0, 0.0)]
    assert RequestQueue(q).buckets(by_query=True)[0][0].name == "b"


def test_an_unknown_order_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"order must be one of \('entry', 'query'\)"):
        make_policy("topology", order="oldest")
