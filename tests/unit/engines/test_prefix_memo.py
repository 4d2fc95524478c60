"""engines.llm_text.prefix_memo: which partial prefills need not reach the engine."""

from __future__ import annotations

import pytest

from engines.llm_text.prefix_memo import SENT_BEFORE, TOO_SHORT, PrefixMemo


def test_a_prefix_shorter_than_one_block_is_never_sent():
    memo = PrefixMemo(block_size=32)
    assert memo.skip_reason(list(range(31))) == TOO_SHORT
    assert memo.skip_reason([]) == TOO_SHORT
    assert memo.skip_reason(list(range(32))) is None


def test_a_prefix_is_skipped_once_its_whole_blocks_were_sent():
    memo = PrefixMemo(block_size=4)
    ids = [1, 2, 3, 4, 5, 6]  # one whole block, [1, 2, 3, 4]; the tail is never cached
    assert memo.skip_reason(ids) is None
    memo.note(ids)
    assert memo.skip_reason(ids) == SENT_BEFORE
    assert memo.skip_reason([1, 2, 3, 4, 9]) == SENT_BEFORE  # same whole blocks, other tail
    assert memo.skip_reason([1, 2, 3, 4, 5, 6, 7, 8]) is None  # a second block not sent yet
    assert memo.skip_reason([9, 2, 3, 4]) is None


def test_salts_keep_prefixes_apart_and_clear_forgets_every_note():
    memo = PrefixMemo(block_size=2)
    memo.note([1, 2], "user-a")
    assert memo.skip_reason([1, 2], "user-a") == SENT_BEFORE
    assert memo.skip_reason([1, 2], "user-b") is None and memo.skip_reason([1, 2]) is None
    memo.clear()
    assert memo.skip_reason([1, 2], "user-a") is None


def test_answer_notes_what_it_lets_through_and_answers_the_rest():
    memo = PrefixMemo(block_size=4)
    assert memo.answer([1, 2, 3, 4, 5]) is None
    assert memo.answer([1, 2, 3, 4, 5]) == {
        "num_prompt_tokens": 5,
        "num_cached_tokens": 0,
        "skipped": SENT_BEFORE,
    }
    assert memo.answer([7])["skipped"] == TOO_SHORT


def test_the_memo_keeps_the_most_recently_used_prefixes():
    memo = PrefixMemo(block_size=1, capacity=2)
    memo.note([1])
    memo.note([2])
    assert memo.skip_reason([1]) == SENT_BEFORE  # used: [2] is now the oldest
    memo.note([3])
    assert memo.skip_reason([2]) is None
    assert memo.skip_reason([1]) == SENT_BEFORE and memo.skip_reason([3]) == SENT_BEFORE


def test_bad_geometry_names_the_problem():
    with pytest.raises(ValueError, match="block_size"):
        PrefixMemo(block_size=0)
