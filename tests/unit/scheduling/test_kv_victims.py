"""issue 73 item 1: running and waiting calls ranked together under the engine's KV room (Autellix
Alg. 1's can_fit), on hand-built entries: the program policy's `victims` with a `KVRoom`."""
from __future__ import annotations

from teola.scheduling.base import Filler, Pending
from teola.scheduling.preemption import KV_HEADROOM, held_tokens


def call(qid: str, name: str, arrival: float, tokens: int = 10) -> Pending:
    req = {"parts": [["user", "hi"]], "complete": True, "max_tokens": 64}
    return Pending(query_id=qid, name=name, op="decoding", depth=0, arrival=arrival, requests=[req], tokens=[tokens])



def test_held_tokens_are_prompt_plus_decoded_plus_one_block():
    assert KV_HEADROOM == 16
    assert held_tokens(100, 0) == 116 and held_tokens(100, 30) == 146



def test_the_first_call_waits_when_it_does_not_fit_beside_running_ones():
    """Filler: 20 tokens free, a 76-token call; taken alone on an idle instance (first_fits), not
    beside running calls."""
    e = call("N", "n", 0.0, tokens=76)
    assert Filler(4, 20).take(e) == 1
    assert Filler(4, 20, first_fits=False).take(e) == 0
