"""SplitParser: items come out as soon as their line is complete, whatever the chunking."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engines.llm_text.split_parser import SplitParser, split_text


def test_numbered_items_are_emitted_when_their_line_ends():
    p = SplitParser("list")
    assert p.feed("Here are queries:\n1. first que") == []
    assert p.feed("ry\n2) second") == ["first query"]
    assert p.feed(" one\n") == ["second one"]
    assert p.feed("3. third") == []
    assert p.finish() == ["third"]
    assert p.items == ["first query", "second one", "third"]


def test_bullets_and_crlf():
    assert split_text("- a\r\n* b\r\n\u2022 c", "list") == ["a", "b", "c"]


def test_numbers_inside_text_are_not_markers():
    assert split_text("1. costs 1.5 million\n-5 is negative\n2. ok", "list") == ["costs 1.5 million", "ok"]


def test_unmarked_list_falls_back_to_lines_at_finish():
    p = SplitParser("list")
    assert p.feed("alpha\nbeta\n") == []
    assert p.finish() == ["alpha", "beta"]


def test_jsonl_items_and_rejects():
    p = SplitParser("jsonl")
    assert p.feed('```json\n{"a": 1}\n[1, 2]\n"x') == ['{"a": 1}', "[1, 2]"]
    assert p.finish() == []  # '"x' is not valid JSON
    assert p.rejected == ["```json", '"x']


def test_unknown_split_names_the_choices():
    with pytest.raises(ValueError, match="list, jsonl"):
        SplitParser("csv")


def test_feed_after_finish_is_an_error():
    p = SplitParser("list")
    p.finish()
    with pytest.raises(RuntimeError):
        p.feed("1. x")


items_st = st.lists(
    st.text(alphabet="abc xyz.,-:0123456789", min_size=1)
    .map(str.strip)
    .filter(lambda s: s and s[0] not in "-*0123456789"),
    min_size=1,
    max_size=6,
)


@given(items=items_st, cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=10))
def test_any_chunking_gives_the_same_items(items, cuts):
    text = "\n".join(f"{i + 1}. {item}" for i, item in enumerate(items))
    p = SplitParser("list")
    got, start = [], 0
    for cut in sorted(set(cuts)):
        got += p.feed(text[start:cut])
        start = max(start, cut)
    got += p.feed(text[start:]) + p.finish()
    assert got == items


@given(values=st.lists(st.one_of(st.integers(), st.text(max_size=5), st.booleans()), min_size=1, max_size=5))
def test_jsonl_round_trip(values):
    text = "\n".join(json.dumps(v) for v in values)
    assert [json.loads(x) for x in split_text(text, "jsonl")] == values
