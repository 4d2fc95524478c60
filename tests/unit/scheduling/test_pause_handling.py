"""Handling "auto" of LLM calls that pause for tools, chosen by the engine's scheduler when a segment
is queued (teola.scheduling.program.pause_handling): INFERCEPT's least waste on hand-computed costs, the rest
of the batch, the policy's own costs (LAMPS), continuations of preserved KV marked, and the agent
component end to end with a scripted LLM."""

from __future__ import annotations

import pytest

from teola.scheduling.base import Pending
from teola.scheduling.dispatch_record import DispatchRecord
from teola.scheduling.program.lamps import LAMPSPolicy
from teola.scheduling.program.pause_handling import PauseBook, PauseCosts, PauseHint, choose_pause_handling
from tests.unit.compile.test_agent_component import CALL, agent_app, answer


def seg(
    key: str = "k",
    handling: str | None = "auto",
    api: str = "calculator",
    tokens: int = 1000,
    query: str = "q",
) -> Pending:
    """A queued segment of a pausing call: its handling is a hint in its record, not its body."""
    return Pending(
        query_id=query,
        name=key,
        op="decoding",
        depth=0,
        arrival=0.0,
        tokens=[tokens],
        requests=[{"kv_key": key, "max_tokens": 32, **({"api": api} if handling else {})}],
        records=[DispatchRecord(pause_kv=handling)],
    )


def prepared(book: PauseBook, e: Pending, policy=None) -> PauseHint:
    (hint,) = book.prepare(e, policy)
    return hint


@pytest.mark.parametrize(
    "api_s, swap, expected",
    [
        # context 1,000 tokens alone; recompute 1e-4 s/token = 0.1 s. Waste (token-seconds):
        (0.5, None, "discard"),  # preserve 0.5 x 1000 = 500 > discard 0.1 x 1000 = 100
        (0.05, None, "preserve"),  # preserve 50 < discard 100
        (0.5, 1e-6, "swap"),  # swap 2 x 1e-3 x 1000 = 2 < discard 100 < preserve 500
    ],
)
def test_auto_takes_the_least_waste_on_hand_computed_costs(api_s, swap, expected):
    book = PauseBook(
        PauseCosts(fwd_s_per_token=1e-4, swap_s_per_token=swap, api_defaults={"calculator": api_s})
    )
    e = seg()
    assert prepared(book, e).pause_kv == expected
    assert e.records[0].pause_kv == "auto"  # the book decides; the engine scheduler writes the record


def test_the_rest_of_the_batch_makes_discard_dearer():
    # alone: preserve 0.2 x 1000 = 200 > discard 100. In a batch of 4 whose calls average 1,000
    # tokens, discard also recomputes for the 3,000 others: 100 + 0.1 x 3000 = 400 > preserve 200.
    costs = PauseCosts(fwd_s_per_token=1e-4, api_defaults={"calculator": 0.2})
    alone, batched = PauseBook(costs, batch_size=1), PauseBook(costs, batch_size=4)
    for book, expected in ((alone, "discard"), (batched, "preserve")):
        assert prepared(book, seg()).pause_kv == expected


def test_a_policy_with_its_own_costs_decides():
    lamps = LAMPSPolicy(fwd_s_per_token=1e-4, api_defaults={"calculator": 0.05})
    # the book's own costs say discard (a 10 s tool); LAMPS's means say preserve
    book = PauseBook(PauseCosts(fwd_s_per_token=1e-4, api_defaults={"calculator": 10.0}))
    assert prepared(book, seg(), lamps).pause_kv == "preserve"
    assert choose_pause_handling(None, "calculator", 1000, 0, book.costs) == "discard"


def test_a_continuation_of_preserved_kv_is_marked_and_forgotten_with_its_query():
    book = PauseBook(PauseCosts(api_defaults={"calculator": 0.0}))  # a free pause: preserve
    assert prepared(book, seg(tokens=100, query="q1")) == PauseHint(
        pause_kv="preserve", resumes_preserved=False
    )
    prepared(book, seg(tokens=100, query="q2"))
    assert prepared(book, seg(handling=None, tokens=150, query="q1")) == PauseHint(
        pause_kv=None, resumes_preserved=True
    )
    # the pause was consumed by its continuation
    assert prepared(book, seg(handling=None, tokens=150, query="q1")) == PauseHint(
        pause_kv=None, resumes_preserved=False
    )
    book.end_program("q2")
    assert book.paused == {}


def test_a_discarded_pause_and_calls_without_a_kv_key_are_left_alone():
    book = PauseBook()
    plain = Pending(
        query_id="q",
        name="p",
        op="decoding",
        depth=0,
        arrival=0.0,
        requests=[{"max_tokens": 8}],
        tokens=[10],
        records=[DispatchRecord(pause_kv="auto")],
    )
    assert prepared(book, plain) == PauseHint(pause_kv="auto", resumes_preserved=False)
    assert prepared(book, seg(handling="discard", tokens=10)) == PauseHint(
        pause_kv="discard", resumes_preserved=False
    )
    assert prepared(book, seg(handling=None, tokens=20)) == PauseHint(pause_kv=None, resumes_preserved=False)


@pytest.mark.parametrize(
    "value, message",
    [
        ({"fwd": 1}, "keys among"),
        ({"fwd_s_per_token": -1}, ">= 0"),
        ({"api_defaults": {"web": "slow"}}, ">= 0"),
        ("fast", "must be a dict"),
    ],
)
def test_bad_pause_costs_are_named(value, message):
    with pytest.raises(ValueError, match=message):
        PauseCosts.from_option(value)


async def test_the_agent_component_with_auto_runs_its_continuation_first_on_preserved_kv():
    app, llm = agent_app([CALL, "391."], handling="auto")
    await app.start(pause_costs={"api_defaults": {"calculator": 0.0}})
    res = await answer(app)
    assert res.output == "391."
    first, second = llm.requests
    assert first["pause_kv"] == "preserve" and second.get("resumes_preserved") is True


async def test_the_agent_component_with_auto_discards_for_a_slow_tool():
    app, llm = agent_app([CALL, "391."], handling="auto")
    await app.start(pause_costs={"api_defaults": {"calculator": 60.0}})
    await answer(app)
    assert llm.requests[0]["pause_kv"] == "discard" and "resumes_preserved" not in llm.requests[1]


def test_a_length_predictor_sets_predictions_and_a_failing_one_is_ignored(caplog):
    from teola.scheduling.program.length_predictions import predicted_lengths

    given, plain, bad = {"predicted_tokens": 5}, {"max_tokens": 64}, {"max_tokens": 64}
    assert predicted_lengths(lambda r: 17, [given, plain], "llm") == [None, 17]
    assert predicted_lengths(lambda r: 1 / 0, [bad], "llm") == [None]
    assert predicted_lengths(lambda r: "long", [bad], "llm") == [None]
    assert predicted_lengths(None, [bad], "llm") == [None]
    assert "length predictor failed: ZeroDivisionError" in caplog.text and "answered 'long'" in caplog.text


async def test_the_runtime_hands_the_agents_segments_to_the_length_predictor():
    seen = []
    app, llm = agent_app([CALL, "391."])
    await app.start(length_predictor=lambda r: seen.append(r.get("continuation")) or 12)
    await answer(app)
    assert [r["predicted_tokens"] for r in llm.requests] == [12, 12] and len(seen) == 2
    with pytest.raises(TypeError, match="length_predictor must be callable"):
        from teola.runtime import Runtime

        Runtime({}, length_predictor=3)


async def test_auto_is_chosen_from_the_length_prediction_with_the_inputs_lamps_ranks_by():
    # (issue 62: "auto" was chosen before the prediction, from prompt + max_tokens.) A 100-token
    # prompt, max_tokens 500, predicted 20. Recompute 1e-3 s/token, a 0.5 s tool, no swap, alone:
    # C = 120: preserve 0.5 x 120 = 60 > discard 0.12 x 120 = 14.4 -> discard
    # (from max_tokens, C = 600: preserve 300 < discard 360 -> preserve)
    from teola.ir.engine_spec import Engine
    from teola.runtime import Runtime
    from tests.unit.api.test_tool_calls import ScriptedLLM

    options = {"fwd_s_per_token": 1e-3, "api_defaults": {"calc": 0.5}}
    rt = Runtime(
        {"llm": Engine("llm", kind="vllm", model="m")},
        {"llm": ScriptedLLM(["done"])},
        policy="lamps",
        policy_options={"lamps": options},
        length_predictor=lambda r: 20,
    )
    req = {"parts": [["user", "x" * 396]], "complete": True, "max_tokens": 500, "kv_key": "k", "api": "calc"}
    sent = dict(req)
    await rt.start()
    try:
        outcome = await rt.submit_call("llm", req, program="p", call_id="c", pause_kv="auto")
    finally:
        await rt.stop()
    # the hints went into the call's record: the body is as it was handed in; the outcome names the handling
    assert req == sent and outcome.pause_kv == "discard"
    # the score of that call: 20 x 100 + 210 before the API, 120 tokens held 6 iterations (0.12 s)
    score, handling = LAMPSPolicy(**options).score(
        Pending(
            query_id="p",
            name="c",
            op="decoding",
            depth=0,
            arrival=0.0,
            requests=[req],
            tokens=[600],
            records=[DispatchRecord(predicted_tokens=20, pause_kv="discard")],
        )
    )
    assert handling == "discard" and score == pytest.approx(2210 + 720)


async def test_the_agent_components_tool_calls_teach_the_llm_policy_their_durations():
    # (issue 62: only Program.call_with_tools fed observe_api)
    app, llm = agent_app([CALL, "391."], handling="auto")
    await app.start(policy="lamps")
    policy = app.runtime.schedulers["llm"].policy
    await answer(app)
    mean, n = policy.api_mean["calculator"]
    assert n == 1 and mean >= 0.0


async def test_a_legacy_request_with_hints_inside_is_split_at_submission():
    """A request dict built with hint fields (the simulated LAMPS studies build them so): they go
    into the record; the queued body holds none; the caller's dict is left as it was handed in (the
    handling applied is the outcome's `pause_kv`, never written back into the dict)."""
    from teola.ir.engine_spec import Engine
    from teola.runtime import Runtime
    from tests.unit.api.test_tool_calls import ScriptedLLM

    llm = ScriptedLLM(["done"])
    rt = Runtime(
        {"llm": Engine("llm", kind="vllm", model="m")},
        {"llm": llm},
        policy="lamps",
        policy_options={"lamps": {"fwd_s_per_token": 1e-3, "api_defaults": {"calc": 0.5}}},
    )
    req = {
        "parts": [["user", "x" * 396]],
        "complete": True,
        "max_tokens": 500,
        "kv_key": "k",
        "api": "calc",
        "pause_kv": "auto",
        "predicted_tokens": 20,
    }
    sent = dict(req)
    await rt.start()
    try:
        outcome = await rt.submit_call("llm", req, program="p", call_id="c")
        with pytest.raises(TypeError, match="hints are"):
            await rt.submit_call("llm", dict(req), program="p", call_id="d", priority=3)
    finally:
        await rt.stop()
    assert outcome.pause_kv == "discard" and req == sent
    (seen,) = llm.requests
    assert seen["pause_kv"] == "discard" and seen["predicted_tokens"] == 20
