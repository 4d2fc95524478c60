"""The engine tier's runner table and its one stream consumer, on hand-built batches and streams."""

import asyncio
from types import SimpleNamespace

import pytest

import teola.runtime.engine_tier.runners as runners
from engines.protocol import StreamEvent
from engines.stream_events import Delta, Item, Progress
from teola.runtime.engine_tier.stream_consumer import Streamed, consume

Runner = runners.Runner


def facts(op="decoding", entries=2, preemptible=False, continuous=True, returns_each=True):
    return runners.BatchFacts(
        op=op, entries=entries, preemptible=preemptible, continuous=continuous, returns_each=returns_each
    )


@pytest.mark.parametrize(
    ("f", "runner"),
    [
        (facts(preemptible=True), Runner.CALLS),
        (facts(op="partial_decoding", preemptible=True), Runner.CALLS),
        (facts(op="partial_decoding"), Runner.ITEMS),
        (facts(), Runner.EACH),
        (facts(entries=1), Runner.BATCH),
        (facts(continuous=False), Runner.BATCH),
        (facts(returns_each=False), Runner.BATCH),
    ],
)
def test_the_first_row_that_holds_chooses_the_runner(f, runner):
    assert runners.choose(f) is runner


def test_every_runner_but_calls_runs_a_taken_batch():
    assert set(runners.BATCH_RUNNERS) == set(Runner) - {Runner.CALLS}


def ctx_streaming(events):
    async def stream(inst, op, requests):
        for ev in events:
            yield ev

    loop = SimpleNamespace(time=lambda: 1.0)
    return SimpleNamespace(name="llm", loop=loop, executor=SimpleNamespace(stream=stream))


def run(events, handlers, n=2, **kw):
    return asyncio.run(consume(ctx_streaming(events), None, "decoding", [{}] * n, handlers, **kw))


def test_finals_come_back_in_request_order_and_handlers_hear_their_kinds():
    heard = []
    finals = run(
        [
            (1, StreamEvent.DELTA, Delta(text="b")),
            (0, StreamEvent.DELTA, Delta(text="a")),
            (1, StreamEvent.FINAL, "B"),
            (0, StreamEvent.PROGRESS, Progress(tokens=3)),
            (0, StreamEvent.FINAL, "A"),
        ],
        {StreamEvent.DELTA: lambda i, p, t: heard.append((i, p.text))},
    )
    assert finals == ["A", "B"] and heard == [(1, "b"), (0, "a")]


def test_a_stream_without_every_final_fails_and_says_which_remain():
    seen = Streamed.of(2)
    with pytest.raises(RuntimeError, match="without a final result for 1 of 2"):
        run([(0, StreamEvent.DELTA, Delta(text="a")), (1, StreamEvent.FINAL, "B")], {}, seen=seen)
    assert seen.open == {0} and seen.heard == {0, 1} and seen.finals == [None, "B"]


def test_a_bad_index_or_an_unexpected_kind_is_an_error_naming_the_engine():
    with pytest.raises(RuntimeError, match="engine 'llm' streamed request index 5 of a 2-request batch"):
        run([(5, StreamEvent.FINAL, "x")], {})
    with pytest.raises(RuntimeError, match="streamed an event of kind"):
        run([(0, StreamEvent.DELTA, Delta(text="x"))], {StreamEvent.ITEM: lambda i, p, t: None}, strict=True)


@pytest.mark.parametrize(
    ("kind", "payload", "expected"),
    [
        (StreamEvent.ITEM, "an item as bare text", "Item"),
        (StreamEvent.DELTA, Item(text="x"), "Delta"),
        (StreamEvent.PROGRESS, 3, "Progress"),
    ],
)
def test_a_payload_not_of_its_kinds_type_is_an_error_naming_the_engine_and_the_type(kind, payload, expected):
    heard = []
    with pytest.raises(
        RuntimeError,
        match=f"engine 'llm' streamed a '{kind}' event carrying .*, not engines.stream_events.{expected}",
    ):
        run([(0, kind, payload)], {kind: lambda i, p, t: heard.append(p)})
    assert heard == []  # the handler never saw it
