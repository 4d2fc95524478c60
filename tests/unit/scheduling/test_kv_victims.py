"""issue 73 item 1: running and waiting calls ranked together under the engine's KV room (Autellix
Alg. 1's can_fit), on hand-built entries: the program policy's `victims` with a `KVRoom`."""

from __future__ import annotations

from teola.scheduling.base import Filler, Limits, Pending
from teola.scheduling.kv_room import KVRoom
from teola.scheduling.preemption import KV_HEADROOM, held_tokens
from teola.scheduling.program.mlfq import MLFQPolicy


def call(qid: str, name: str, arrival: float, tokens: int = 10) -> Pending:
    req = {"parts": [["user", "hi"]], "complete": True, "max_tokens": 64}
    return Pending(
        query_id=qid, name=name, op="decoding", depth=0, arrival=arrival, requests=[req], tokens=[tokens]
    )


def policy() -> MLFQPolicy:
    """Queues of 4, 8, 16 ... tokens of service: a call that decoded 5 tokens is in Q1."""
    return MLFQPolicy(service="tokens", num_queues=4, base_quantum=4, growth=2.0, beta=None, rerank_every=1)


def running(pol: MLFQPolicy, *entries: Pending) -> None:
    pol.schedule(list(entries), 0.0, Limits(max_batch=8, max_efficient_batch=8))
    for e in entries:
        e.taken = 1


def test_held_tokens_are_prompt_plus_decoded_plus_one_block():
    assert KV_HEADROOM == 16
    assert held_tokens(100, 0) == 116 and held_tokens(100, 30) == 146


def test_a_demoted_running_call_goes_for_a_better_waiting_one_that_does_not_fit():
    """Budget 300: the long call holds 100 + 40 decoded + 16 = 156 and the other 120; 24 tokens are
    left and the new Q0 call needs 60 + 16 = 76. The long call decoded 40 tokens (Q3), the other 2
    (Q0): the long one goes (156 back: 180 free >= 76); the Q0 one stays. Without the room, 2 free
    seats let the new call in and nothing is preempted (the seat rule alone)."""
    pol = policy()
    long, other = call("L", "long", 0.0), call("O", "other", 0.0)
    running(pol, long, other)
    assert pol.progress(long, 40) == 3 and pol.progress(other, 2) == 0
    new = call("N", "new", 1.0)
    room = KVRoom(seats=2, tokens=300 - 156 - 120, held={long: 156, other: 120}, need={new: 76})
    assert pol.victims([long, other], [new], 2, 1.0, room=room) == [long]
    assert pol.victims([long, other], [new], 2, 1.0) == []
    assert pol.preempted_for == {"kv": 0, "ranked": 1, "promoted": 0}  # new's own queue is better


def test_no_running_call_goes_for_a_waiting_one_of_a_worse_or_equal_queue():
    """The same room, but the waiting call is in Q3 like the long one: nothing is preempted, and it
    blocks worse waiting calls behind it (strict order) even where one of them would fit."""
    pol = policy()
    long, other = call("L", "long", 0.0), call("O", "other", 0.0)
    running(pol, long, other)
    pol.progress(long, 40)
    late = call(
        "L", "late", 1.0
    )  # program L's next call: its program's service puts it in Q3 (PLAS/MLFQ core)
    pol.core.admit(late, "L", "late", 1.0, None)
    pol.core.charge(late, 40)
    room = KVRoom(seats=2, tokens=24, held={long: 156, other: 120}, need={late: 76})
    assert pol.victims([long, other], [late], 2, 1.0, room=room) == []


def test_running_calls_that_overflow_the_budget_shed_the_worst_queue_first():
    """No one waits; the running calls hold 156 + 120 + 50 = 326 of 300 (they grew as they decoded):
    -26. The worst queue (the long call, Q3) goes: +156, the rest fit. Never the last one running."""
    pol = policy()
    long, a, b = call("L", "long", 0.0), call("A", "a", 0.0), call("B", "b", 0.0)
    running(pol, long, a, b)
    pol.progress(long, 40)
    room = KVRoom(seats=5, tokens=300 - 326, held={long: 156, a: 120, b: 50}, need={})
    assert pol.victims([long, a, b], [], 5, 1.0, room=room) == [long]
    alone = KVRoom(seats=7, tokens=-10, held={long: 310}, need={})
    assert pol.victims([long], [], 7, 1.0, room=alone) == []
    assert pol.preempted_for == {"kv": 1, "ranked": 0, "promoted": 0}


def test_a_waiting_call_that_cannot_be_made_to_fit_preempts_nothing():
    """It needs 500 of a 300-token budget: preempting the Q3 call (156) would not let it run."""
    pol = policy()
    long, other = call("L", "long", 0.0), call("O", "other", 0.0)
    running(pol, long, other)
    pol.progress(long, 40)
    big = call("N", "big", 1.0)
    room = KVRoom(seats=2, tokens=24, held={long: 156, other: 120}, need={big: 500})
    assert pol.victims([long, other], [big], 2, 1.0, room=room) == []
    assert pol.preempted_for == {"kv": 0, "ranked": 0, "promoted": 0}  # the undone drop is not counted


def test_the_first_call_waits_when_it_does_not_fit_beside_running_ones():
    """Filler: 20 tokens free, a 76-token call; taken alone on an idle instance (first_fits), not
    beside running calls."""
    e = call("N", "n", 0.0, tokens=76)
    assert Filler(4, 20).take(e) == 1
    assert Filler(4, 20, first_fits=False).take(e) == 0
