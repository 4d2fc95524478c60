"""The preemption rules of teola.scheduling.preemption on hand-built entries (pure logic, no engines)."""

from teola.scheduling.base import Pending, Pick
from teola.scheduling.preemption import admission_slots, preemptible, swap_keys, tokens_left


def pick(op, n=1, taken=0):
    e = Pending(query_id="q", name="d", op=op, depth=0, arrival=0.0, requests=[{"i": i} for i in range(n)])
    e.taken = taken
    return Pick(entry=e, count=n - taken)


def test_only_whole_decoding_entries_and_single_partial_decodes_are_preemptible():
    assert preemptible("decoding", [pick("decoding", 3), pick("decoding")])
    assert not preemptible("decoding", [pick("decoding", 3, taken=1)])
    assert preemptible("partial_decoding", [pick("partial_decoding")])
    assert not preemptible("partial_decoding", [pick("partial_decoding", 2)])
    assert not preemptible("prefilling", [pick("prefilling")])


def test_admission_slots_stop_when_the_running_calls_fill_the_token_budget():
    assert admission_slots(8, 0, 3, 10_000) == 5  # no token budget: only the request budget
    assert admission_slots(8, 1000, 3, 999) == 5
    assert admission_slots(8, 1000, 3, 1000) == 0
    assert admission_slots(8, 1000, 0, 5000) == 8  # nothing running: the next call may overflow


def test_tokens_left_after_a_run():
    req = {"max_tokens": 20}
    assert tokens_left(req, 0, {"text": "done"}) == 0  # it ended
    assert tokens_left(req, 4, {"aborted": True, "output_token_ids": [1, 2, 3]}) == 13
    assert tokens_left(req, 0, {"aborted": True}) is None  # no ids: cannot resume
    assert tokens_left({"max_tokens": 0}, 0, {"aborted": True, "output_token_ids": []}) is None


def test_swap_keys_skip_requests_without_one():
    assert swap_keys([{"kv_swap_key": "a"}, {}, {"kv_swap_key": ""}, {"kv_swap_key": "b"}]) == ["a", "b"]
