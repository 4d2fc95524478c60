"""issue 73: preemptive admission on the engine's own KV numbers (teola.scheduling.kv_ledger)."""

from __future__ import annotations

from teola.scheduling.kv_ledger import KVLedger
from teola.scheduling.preemption import KV_HEADROOM, held_tokens


def test_the_headroom_is_one_engine_block_once_reported():
    assert held_tokens(100, 30) == 100 + 30 + KV_HEADROOM
    assert held_tokens(100, 30, 32) == 162  # vLLM's CPU block


def test_a_first_report_charges_the_engines_prompt_and_block():
    """A request estimated at 67 (200 characters // 4 + 1 = 51, + 16) that the engine tokenized to 4
    tokens in 32-token blocks, 3 tokens decoded: 4 + 3 + 32 = 39; every request's headroom then
    changes by 32 - 16 = +16."""
    ledger = KVLedger()
    assert ledger.headroom_change() == 0
    assert ledger.first_report(67, prompt=4, decoded=3, block=32) == 39
    assert ledger.reported == 39 and ledger.headroom_change() == 16
    assert ledger.first_report(67, prompt=4, decoded=0, block=0) == 36  # no block size given: the last one


def test_used_blocks_rebase_the_instance_then_reported_requests_move_it():
    """Two reported requests charged 20 + 20 = 40 (prompt 4 + headroom 16 each) share their blocks
    in the engine: it reports 2 blocks of 16 in use (32). The instance's count goes from the sum of
    charges (40, plus 67 for a request not reported yet = 107) to 32 + 67 = 99: a change of -8. One
    reported request decodes 5 (reported 45, the count +5 by the Preemptor), the next report says
    3 blocks (48): adjust 48 - 45 = 3, change 3 - (-8) = +11. Both reported requests leave (45 off the
    count by the Preemptor): the ledger puts 45 back, as the engine has not said what it freed (adjust
    48); a report of 1 block then (16, nothing reported running) changes the count by 16 - 48 = -32.
    When nothing runs, the count drops the adjust (-16)."""
    ledger = KVLedger()
    ledger.first_report(67, prompt=4, decoded=0, block=16)
    ledger.first_report(67, prompt=4, decoded=0, block=16)
    assert ledger.rebase(2) == -8 and ledger.adjust == -8
    ledger.grew(5)
    assert ledger.rebase(3) == 11 and ledger.adjust == 3
    assert ledger.left(45) == 45 and (ledger.reported, ledger.adjust) == (0, 48)
    assert ledger.rebase(1) == -32
    assert ledger.emptied() == -16 and (ledger.adjust, ledger.reported) == (0, 0)


def test_without_used_blocks_a_leaving_request_takes_its_charge_with_it():
    """vLLM reports no block counts: the count is the sum of charges, so a request charged 39 that
    leaves frees its 39 at once (the ledger adds nothing back)."""
    ledger = KVLedger()
    ledger.first_report(67, prompt=4, decoded=3, block=32)
    assert ledger.left(39) == 0 and (ledger.reported, ledger.adjust) == (0, 0)
