"""LAMPS (teola.scheduling.program.lamps / api_handling) on hand-computed cases: INFERCEPT's waste
equations choose the handling, memory over time scores calls, the policy runs the least
memory-hungry call first, starving calls go ahead after `starvation` rounds, scores refresh on
schedule."""

from __future__ import annotations

import pytest

from teola.scheduling.dispatch_record import DispatchRecord, lift_hints
from teola.scheduling.program.api_handling import ApiCall, choose_handling, memory_over_time, waste
from teola.scheduling.program.lamps import is_last_segment
from teola.scheduling.registry import Limits, Pending, Pick, RequestQueue, make_policy


def test_waste_equations_on_hand_computed_values():
    # T_api 2 s, C 100 tokens, C_other 300, T_fwd(C) 0.5 s, T_swap(C) 0.1 s
    assert waste("preserve", 2.0, 100, 300, 0.5, 0.1) == 200.0  # 2 x 100
    assert waste("discard", 2.0, 100, 300, 0.5, 0.1) == 200.0  # 0.5 x 100 + 0.5 x 300
    assert waste("swap", 2.0, 100, 300, 0.5, 0.1) == pytest.approx(80)  # 2 x 0.1 x 400
    assert choose_handling(2.0, 100, 300, 0.5, 0.1) == "swap"
    assert choose_handling(2.0, 100, 300, 0.5, None) == "preserve"  # no swap here; a tie goes to preserve
    assert choose_handling(0.1, 100, 300, 0.5, 0.1) == "preserve"  # a short API: keep the KV (10)
    assert choose_handling(10.0, 10, 0, 0.01, 0.05) == "discard"  # a long API, a short context (0.1)


def test_memory_over_time_of_each_handling():
    step = 1.0  # seconds per iteration: durations below are in iterations
    # 5 tokens before a 2-iteration API kept resident, 1 after: (1+..+5) + 5 x 2 + (5 + 1) = 31
    assert memory_over_time(ApiCall(0, 5, 2.0, 0, 1), "preserve", step) == 31
    # 1 token, API discarded (recompute of 1 token held 1 iteration), 1 after: 1 + 1 + (1 + 1) = 4
    assert memory_over_time(ApiCall(0, 1, 7.0, 0, 1), "discard", step, fwd_s=1.0) == 4
    # 2 tokens, swapped out and in (0.5 iteration each, 2 tokens held), 1 after: 3 + 2 + (2 + 1) = 8
    assert memory_over_time(ApiCall(0, 2, 1.0, 0, 1), "swap", step, swap_s=0.5) == 8
    # a prompt of 10 and an API response of 4 tokens: 3 x 10 + 6 + 13 x 3 + (1 x 17 + 1) = 93
    assert memory_over_time(ApiCall(10, 3, 3.0, 4, 1), "preserve", step) == 93
    assert memory_over_time(ApiCall(10, 3), "preserve", step) == 36  # no API call: pre-API part only


# The worked example of docs/program_scheduling.md ("When each handling is chosen"): a call with
# 600 context tokens in a batch whose other calls hold 10,000; prefill 1e-4 s/token, swap 2e-5 s/token.
# T_fwd(C) = 0.06 s, T_swap(C) = 0.012 s: preserve wastes 600 x T_api, discard 0.06 x 10,600 = 636,
# swap 2 x 0.012 x 10,600 = 254.4 token-seconds; preserve wins below 0.424 s of API (1.06 s without swap).
WORKED = {
    "math": (9e-5, "preserve", "preserve"),
    "virtual env": (0.09, "preserve", "preserve"),
    "qa": (0.72, "swap", "preserve"),
    "image": (20.0, "swap", "discard"),
    "chatbot": (28.6, "swap", "discard"),
}


@pytest.mark.parametrize("tool", sorted(WORKED))
def test_the_worked_handling_example_of_the_docs(tool):
    api_s, with_swap, without_swap = WORKED[tool]
    fwd, swap = 1e-4 * 600, 2e-5 * 600
    assert waste("discard", api_s, 600, 10_000, fwd, swap) == pytest.approx(636)
    assert waste("swap", api_s, 600, 10_000, fwd, swap) == pytest.approx(254.4)
    assert choose_handling(api_s, 600, 10_000, fwd, swap) == with_swap
    assert choose_handling(api_s, 600, 10_000, fwd, None) == without_swap
    # the break-even API durations the docs quote
    assert (
        choose_handling(0.42, 600, 10_000, fwd, swap)
        == "preserve"
        != choose_handling(0.43, 600, 10_000, fwd, swap)
    )
    assert (
        choose_handling(1.05, 600, 10_000, fwd, None)
        == "preserve"
        != choose_handling(1.07, 600, 10_000, fwd, None)
    )


def entry(name: str, max_tokens: int, prompt: int = 10, arrival: float = 0.0, **req) -> Pending:
    """A queued call; the program hints among `req` (predicted_tokens, pause_kv, resumes_preserved)
    go into its dispatch record, as a submitter hands them in, not into its body."""
    body, hints = lift_hints({"max_tokens": max_tokens, **req})
    return Pending(
        query_id=name,
        name=name,
        op="decoding",
        depth=0,
        arrival=arrival,
        requests=[body],
        tokens=[prompt + max_tokens],
        records=[DispatchRecord(**hints)],
    )


def picked(policy, entries: list[Pending]) -> str:
    return (
        policy.schedule(RequestQueue(entries), 0.0, Limits(max_batch=1, max_efficient_batch=1))
        .picks[0]
        .entry.name
    )


def test_the_call_with_the_least_memory_over_time_runs_first():
    # recompute of a 30-token context takes 0.05 s (2.5 iterations)
    lamps = make_policy(
        "lamps", step_s=0.02, fwd_s_per_token=0.05 / 30, api_defaults={"search": 2.0, "calc": 0.01}
    )
    quick_api = entry("quick_api", 20, api="calc", post_tokens=5)  # 410 + 30 x 0.5 (preserve) + 165 = 590
    long_api = entry("long_api", 20, api="search", post_tokens=5)  # 410 + 30 x 2.5 (discard) + 165 = 650
    short = entry("short", 30)  # 30 x 10 + 465 = 765
    order = []
    pool = [long_api, short, quick_api]
    while pool:
        name = picked(lamps, pool)
        order.append(name)
        pool = [e for e in pool if e.name != name]
    assert order == ["quick_api", "long_api", "short"]
    assert lamps.score(quick_api) == (pytest.approx(590), "preserve")
    assert lamps.score(long_api) == (pytest.approx(650), "discard")
    assert lamps.score(short) == (pytest.approx(765), "none")


def step(policy, pool: list[Pending], decoded: int = 0) -> str:
    """One admission round: the call picked, then `decoded` engine iterations of it (its progress)."""
    e = policy.schedule(RequestQueue(pool), 0.0, Limits(max_batch=1, max_efficient_batch=1)).picks[0].entry
    if decoded:
        policy.progress(e, decoded)
    return e.name


def test_a_starving_call_goes_ahead_after_the_threshold_in_engine_iterations():
    # (this test counted admission rounds before; LAMPS §4.4 counts engine iterations). Counted from
    # first sight (the named option): big was never scheduled, so by default its counter does not run
    lamps = make_policy("lamps", starvation=3, starvation_from="seen")
    big = entry("big", 500)
    assert step(lamps, [big, entry("small0", 5)], decoded=2) == "small0"  # big has waited 2 iterations
    assert (
        step(lamps, [big, entry("small1", 5, arrival=1.0)], decoded=1) == "small1"
    )  # admitted at 2: clock 3
    assert lamps.iterations == 3 and lamps.counter(big) == 3
    # 3 iterations waited after 2 admission rounds: big is starving and runs ahead of a better-ranked call
    assert step(lamps, [big, entry("small2", 5, arrival=2.0)]) == "big"


def test_admission_rounds_without_engine_iterations_never_starve_a_call():
    lamps = make_policy("lamps", starvation=3, starvation_from="seen")
    big = entry("big", 500)
    assert [step(lamps, [big, entry(f"small{i}", 5, arrival=float(i))]) for i in range(10)] == [
        f"small{i}" for i in range(10)
    ]
    assert lamps.iterations == 0 and lamps.counter(big) == 0


def test_the_iteration_clock_follows_the_call_that_decoded_the_most():
    lamps = make_policy("lamps", starvation_from="seen")  # c's counter shows the clock before c runs
    a, b, c = entry("a", 50), entry("b", 60, arrival=1.0), entry("c", 70, arrival=2.0)
    assert step(lamps, [a, b, c], decoded=4) == "a"  # a admitted at 0: 4 iterations
    assert step(lamps, [b, c], decoded=1) == "b"  # b admitted at 4: 5
    lamps.progress(a, 5)  # a's 5th token is the same iteration as b's 1st
    assert lamps.iterations == 5 and lamps.counter(c) == 5
    # an engine without progress: a call's decoded tokens arrive when it ends (admitted at 5, 9 tokens)
    assert step(lamps, [c]) == "c"
    lamps.observe([Pick(entry=c, count=1)], 0.0, 1.0, [{"num_output_tokens": 9}])
    assert lamps.iterations == 14 and c not in lamps.admitted_at


def test_scores_are_cached_between_refreshes():
    # a: 155 + 255 around its API; preserving a 10 ms API adds 10; recomputing its 20 tokens (1 s) 1,000
    lamps = make_policy("lamps", refresh=3, fwd_s_per_token=0.05, api_defaults={"tool": 0.01})
    a, b = entry("a", 10, api="tool", post_tokens=10), entry("b", 25)  # b: 575
    assert picked(lamps, [a, b]) == "a"  # round 1: scores computed
    lamps.observe_api("tool", 50.0)  # the tool turns out slow: a's API is now expensive
    assert picked(lamps, [a, b]) == "a"  # round 2: cached score
    assert picked(lamps, [a, b]) == "a"  # round 3: cached
    assert picked(lamps, [a, b]) == "b"  # round 4: refreshed


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="starvation"):
        make_policy("lamps", starvation=0)
    with pytest.raises(ValueError, match="starvation_from"):
        make_policy("lamps", starvation_from="arrival")
    with pytest.raises(ValueError, match="refresh"):
        make_policy("lamps", refresh=0)


def test_sjf_runs_the_shortest_predicted_call_first_whatever_its_api():
    policy = make_policy("sjf")
    q = RequestQueue()
    for e in (
        entry("long", 50, arrival=0.0),
        entry("chatbot", 5, arrival=1.0, api="chatbot", post_tokens=4),
        entry("short", 8, arrival=2.0, predicted_tokens=3),
    ):
        q.push(e)
    picked = [
        p.entry.query_id for p in policy.schedule(q, 3.0, Limits(max_batch=1, max_efficient_batch=1)).picks
    ]
    assert picked == ["short"]  # 3 predicted tokens < 5 + 4 < 50
    assert (
        policy.preemptive
        and policy.schedule(RequestQueue(), 0.0, Limits(max_batch=1, max_efficient_batch=1)).picks == []
    )


def test_the_profiled_batch_context_enters_the_handling_choice():
    # recompute 0.005 s per token, no swap, a 1 s API, a 100-token context
    policy = make_policy("lamps", batch_size=4, fwd_s_per_token=0.005, api_defaults={"search": 1.0})
    e = entry("a", 10, prompt=90, api="search")
    assert policy.other_context() == 0  # nothing admitted yet
    assert policy.score(e)[1] == "discard"  # 0.5 s x 100 = 50 < preserve 1 s x 100
    q = RequestQueue()
    for name, tokens in (("x", 100), ("y", 300)):
        q.push(entry(name, 1, prompt=tokens - 1))
    policy.schedule(q, 0.0, Limits(max_batch=2, max_efficient_batch=2))
    assert policy.other_context() == 600  # 3 other calls x the 200-token mean admitted
    # recomputing now stalls the other 600 tokens too: 0.5 x 700 = 350 > preserve 100
    assert policy.score(e)[1] == "preserve"
    with pytest.raises(ValueError, match="batch_size"):
        make_policy("lamps", batch_size=0)


@pytest.mark.parametrize("name,options", [("lamps", {"preserved_first": True}), ("fcfs", {}), ("sjf", {})])
def test_a_call_resuming_on_preserved_kv_goes_first(name, options):
    # the continuation is the latest, the longest and the most memory-hungry, and still runs first:
    # its KV stays pinned for as long as it waits (INFERCEPT keeps a preserved request in the batch)
    policy = make_policy(name, **options)
    short = entry("short", 4, arrival=0.0)
    resumed = entry("resumed", 200, prompt=3000, arrival=5.0, resumes_preserved=True)
    assert picked(policy, [short, resumed]) == "resumed"
    assert picked(policy, [short, entry("plain", 200, prompt=3000, arrival=5.0)]) == "short"


def test_lamps_ranks_a_preserved_resume_by_its_score_like_any_call():
    # LAMPS Algorithm 1 sorts every request by score: the resume (3000-token prompt, 200 tokens:
    # 200 x 3000 + 200 x 201 / 2 = 620,100) goes after the short call (4 tokens on a small prompt)
    policy = make_policy("lamps")
    short = entry("short", 4, arrival=0.0)
    resumed = entry("resumed", 200, prompt=3000, arrival=5.0, resumes_preserved=True)
    assert picked(policy, [short, resumed]) == "short"


def segment(request: str, j: int, max_tokens: int, arrival: float, last: bool = False) -> Pending:
    """Segment j of a pausing call: the segments share the request's kv_key (teola.api.tool_calls)."""
    return Pending(
        query_id=request,
        name=f"{request}#{j}",
        op="decoding",
        depth=0,
        arrival=arrival,
        requests=[{"max_tokens": max_tokens, "kv_key": request}],
        tokens=[10 + max_tokens],
        records=[DispatchRecord(pause_kv=None if last else "swap")],
    )


def test_a_starving_request_stays_ahead_after_its_api_call_until_it_completes():
    # LAMPS §4.4: "prioritization continues until request completion"; only a request not
    # prioritized resets when it reaches an API call. One engine iteration per admission round.
    lamps = make_policy("lamps", starvation=3, starvation_from="seen")
    first = segment("r", 0, 500, 0.0)
    rounds = [step(lamps, [first, entry(f"small{i}", 5, arrival=float(i))], decoded=1) for i in range(4)]
    assert rounds == ["small0", "small1", "small2", "r#0"]  # 3 iterations waited: r is starving
    # after its API call r continues in a new call that has waited no iteration, and still goes first
    assert picked(lamps, [segment("r", 1, 500, 10.0), entry("small4", 5, arrival=11.0)]) == "r#1"
    assert picked(lamps, [segment("r", 2, 500, 20.0, last=True), entry("small5", 5, arrival=21.0)]) == "r#2"
    # its last segment ran: the request is complete and its mark gone
    assert picked(lamps, [segment("r", 3, 500, 30.0), entry("small6", 5, arrival=31.0)]) == "small6"


def test_a_starving_requests_mark_ends_with_its_program():
    lamps = make_policy("lamps", starvation=1, starvation_from="seen")
    p0 = segment("p", 0, 500, 0.0)
    assert step(lamps, [p0, entry("small0", 5)], decoded=1) == "small0"
    assert picked(lamps, [p0, entry("small1", 5)]) == "p#0"  # waited 1 iteration: p starving
    assert picked(lamps, [segment("p", 1, 500, 1.0), entry("small2", 5)]) == "p#1"
    lamps.end_program("p")
    assert picked(lamps, [segment("p", 2, 500, 2.0), entry("small3", 5)]) == "small3"


def test_the_starvation_counter_runs_once_lamps_has_scheduled_the_request():
    # LAMPS §4.4: "the starvation prevention mechanism activates only when LAMPS initially schedules
    # the request to the running queue" (issue 62: the counter ran from first sight). Threshold 3,
    # one engine iteration per admission round.
    lamps = make_policy("lamps", starvation=3)
    first = segment("r", 0, 500, 0.0)
    # never scheduled: 5 iterations waited, its counter stays 0 and the smaller calls keep going first
    rounds = [step(lamps, [first, entry(f"small{i}", 5, arrival=float(i))], decoded=1) for i in range(5)]
    assert rounds == [f"small{i}" for i in range(5)]
    assert lamps.iterations == 5 and lamps.counter(first) == 0 and ("r", "r") not in lamps.starving
    assert step(lamps, [first]) == "r#0"  # LAMPS schedules it: from now on r's counter runs
    # after its API call, r's continuation counts from 0 (§4.4: reset at an API call): iterations 1, 2, 3
    cont = segment("r", 1, 500, 10.0)
    rounds = [step(lamps, [cont, entry(f"small{i}", 5, arrival=10.0 + i)], decoded=1) for i in range(5, 8)]
    assert rounds == ["small5", "small6", "small7"] and lamps.counter(cont) == 3
    assert step(lamps, [cont, entry("small8", 5, arrival=20.0)]) == "r#1"  # 3 iterations: starving
    # the same sequence counted from first sight marks r#0 after its 3rd iteration
    seen = make_policy("lamps", starvation=3, starvation_from="seen")
    first = segment("r", 0, 500, 0.0)
    assert [step(seen, [first, entry(f"small{i}", 5, arrival=float(i))], decoded=1) for i in range(4)] == [
        "small0",
        "small1",
        "small2",
        "r#0",
    ]


def test_a_fixed_handling_is_the_one_the_call_is_ranked_under():
    # (issue 62: the score chose its own handling whatever the request carried)
    lamps = make_policy("lamps", step_s=0.02, fwd_s_per_token=0.05 / 30, api_defaults={"search": 2.0})
    # least waste would discard (650, test above); the caller preserves: 410 + 30 x 100 iterations + 165
    kept = entry("kept", 20, api="search", post_tokens=5, pause_kv="preserve", kv_key="k")
    assert lamps.score(kept) == (pytest.approx(3575), "preserve")


def test_a_pausing_call_without_an_api_name_is_ranked_with_its_api_phase():
    # a pause ("pause_kv") whose tool is not named: the API lasts the mean over the tools seen (2 s);
    # discarding holds the 30-token context for the 2.5-iteration recompute: 410 + 75
    lamps = make_policy("lamps", step_s=0.02, fwd_s_per_token=0.05 / 30, api_defaults={"search": 2.0})
    assert lamps.score(entry("seg", 20, pause_kv="discard", kv_key="k")) == (pytest.approx(485), "discard")
    # a tool never seen is predicted as the mean over the tools seen too (1 s before any)
    assert lamps.predict(entry("other", 20, api="weather")).api_s == 2.0
    assert make_policy("lamps").predict(entry("other", 20, api="weather")).api_s == 1.0


def test_a_measured_batch_size_is_the_mean_number_of_calls_running_at_admission():
    policy = make_policy("lamps", batch_size="measured")
    a, b = entry("a", 1, prompt=99), entry("b", 1, prompt=299)  # 100 and 300 tokens
    policy.schedule(RequestQueue([a]), 0.0, Limits(max_batch=1, max_efficient_batch=1))  # 1 running
    policy.schedule(RequestQueue([b]), 0.0, Limits(max_batch=1, max_efficient_batch=1))  # 2 running
    assert policy.other_context() == 100  # (mean 1.5 calls - 1) x the 200-token mean admitted
    policy.observe([Pick(entry=a, count=1), Pick(entry=b, count=1)], 0.0, 1.0, [{}, {}])
    policy.schedule(
        RequestQueue([entry("c", 1, prompt=199)]), 0.0, Limits(max_batch=1, max_efficient_batch=1)
    )  # 1 running: mean 4/3
    assert policy.other_context() == int((4 / 3 - 1) * 200)
    with pytest.raises(ValueError, match="measured"):
        make_policy("lamps", batch_size="profiled")


@pytest.mark.parametrize("hint", ["predicted_tokens", "pause_kv", "resumes_preserved"])
def test_policies_read_the_hints_from_the_record_and_a_body_may_not_hold_one(hint):
    value = {"predicted_tokens": 3, "pause_kv": "preserve", "resumes_preserved": True}[hint]
    with pytest.raises(ValueError, match=hint):  # a queued body is frozen and refuses the record's fields
        Pending(
            query_id="b",
            name="b",
            op="decoding",
            depth=0,
            arrival=0.0,
            requests=[{"max_tokens": 8, "api": "search", hint: value}],
            tokens=[18],
        )
    plain = entry("p", 8, api="search")
    in_record = entry("r", 8, api="search", **{hint: value})
    assert hint not in in_record.requests[0] and getattr(in_record.records[0], hint) == value
    policy = make_policy(
        "lamps", step_s=0.02, fwd_s_per_token=1.0, api_defaults={"search": 0.001}, preserved_first=True
    )
    if hint == "predicted_tokens":
        from teola.scheduling.program.sjf import predicted_length

        assert (predicted_length(plain), predicted_length(in_record)) == (8, 3)
    elif hint == "pause_kv":
        assert policy.score(in_record)[1] == "preserve" and not is_last_segment(in_record)
        assert is_last_segment(entry("last", 8)) and not is_last_segment(entry("seg", 8, pause_kv="discard"))
    else:
        from teola.scheduling.base import resumes_preserved

        assert (resumes_preserved(plain), resumes_preserved(in_record)) == (False, True)
