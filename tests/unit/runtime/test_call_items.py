"""`CallItems` (teola.runtime.engine_tier.call_items) on hand-written event sequences: what goes
downstream, and when, as a partial decode's runs are stopped, preempted and resumed."""

from __future__ import annotations

from teola.runtime.engine_tier.call_items import CallItems
from tests.support.entry_work import RecordedWork


def items(split: str = "list", max_items: int | None = None) -> tuple[CallItems, RecordedWork]:
    work = RecordedWork(1)
    request = {"split": split, **({"max_items": max_items} if max_items is not None else {})}
    return CallItems(work, request), work


def test_an_item_that_comes_while_the_call_is_stopped_goes_once_the_run_decodes_on():
    feed, work = items()
    feed.engine_item("a", stopping=False, t=1.0)
    feed.engine_item("b", stopping=True, t=2.0)  # the stop failed: the run goes on
    assert work.items == [(1.0, "a")]
    feed.release(3.0)
    feed.engine_item("c", stopping=False, t=4.0)
    assert work.items == [(1.0, "a"), (3.0, "b"), (4.0, "c")] and feed.sent == 3


def test_a_preemption_drops_the_cut_item_and_sends_whole_lines_not_sent_yet():
    """The engine sent "a"; "b" completed as the stop was asked (held), and the abort cut "- c"
    (the engine sends "c" as an item too, held). At the preemption "b" goes and "c" does not; the
    resumed run's text completes "cat", then "d" comes; at the end the unfinished "- e" is an item."""
    feed, work = items()
    feed.engine_item("a", stopping=False, t=1.0)
    feed.engine_item("b", stopping=True, t=2.0)
    feed.engine_item("c", stopping=True, t=2.0)
    assert feed.preempted("- a\n- b\n- c", t=3.0) is None  # no fixed count of items to ask for
    assert work.items == [(1.0, "a"), (3.0, "b")]
    feed.engine_item("at", stopping=False, t=5.0)  # the resumed run's engine saw only "at\n": ignored
    feed.delta("at\n", 5.0)
    feed.delta("- d\n- e", 6.0)
    assert work.items[2:] == [(5.0, "cat"), (6.0, "d")]
    feed.ended("- a\n- b\n- cat\n- d\n- e", 7.0)
    assert [text for _, text in work.items] == ["a", "b", "cat", "d", "e"] and work.items[-1][0] == 7.0


def test_the_resumed_request_asks_for_the_items_still_missing_and_no_more_go_downstream():
    feed, work = items(max_items=3)
    feed.engine_item("a", stopping=False, t=1.0)
    assert feed.preempted("- a\n- b", t=2.0) == 2
    assert not feed.all_out("- a\n- b\n- c") and feed.all_out("- a\n- b\n- c\n")
    feed.delta("ee\n- c\n- d\n", 3.0)
    feed.ended("- a\n- bee\n- c\n- d\n", 4.0)
    assert [text for _, text in work.items] == ["a", "bee", "c"]


def test_text_goes_to_the_work_only_when_its_caller_asked_for_it():
    quiet, quiet_work = items()
    quiet.preempted("", 0.0)
    quiet.delta("- a\n", 1.0)
    assert quiet_work.items == [(1.0, "a")]
    loud = CallItems(RecordedWork(1), {"split": "list", "stream_text": True})
    deltas: list[str] = []
    loud.work.delta = lambda text, t: deltas.append(text)
    loud.delta("- a", 1.0)
    loud.preempted("- a", 2.0)
    loud.delta("\n", 3.0)
    assert deltas == ["- a", "\n"]
