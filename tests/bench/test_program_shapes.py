"""bench.studies.programs.programs' generators at published statistics (bench.studies.sim.sim_programs'
sharegpt / lats shapes) and the user turns that carry their sizes."""

from __future__ import annotations

import random

from bench.studies.sim.program_setup import SHAPES, shape_stats
from engines.sim.text import count_tokens
from teola.sim.program_runs import user_turn
from teola.sim.program_workloads import chat_program, workload


def test_a_calls_mean_draws_a_long_tail_around_it_within_the_cap():
    progs = workload("chat", 0.0, 2000, 3, [1], max_calls=80, calls_mean=6.66)
    n = [len(p.calls) for p in progs]
    assert 5.5 < sum(n) / len(n) < 8.0
    assert max(n) <= 80 and min(n) >= 1
    assert sum(k >= 30 for k in n) > 0  # a tail: lognormal(sigma 1) puts ~1% of programs past 30 calls


def test_user_tokens_are_drawn_per_call_only_when_asked():
    rng = random.Random(0)
    asked = chat_program("p", 0.0, rng, [10], user_mean=256, user_max=1024)
    assert all(8 <= c.user <= 1024 for c in asked.calls)
    # each call's context is everything before it: the previous context, user turn and reply
    for prev, nxt in zip(asked.calls, asked.calls[1:]):
        assert nxt.prompt == prev.prompt + prev.output + nxt.user
    plain = chat_program("p", 0.0, random.Random(0), [10])
    assert all(c.user == 0 for c in plain.calls)


def test_the_default_chat_shape_is_unchanged_by_the_new_options():
    a = workload("chat", 2.0, 50, 1, [7], **SHAPES["chat"])
    b = workload("chat", 2.0, 50, 1, [7], **SHAPES["chat"], calls_mean=None, user_mean=None)
    assert [(p.arrival, [(c.prompt, c.output) for c in p.calls]) for p in a] == [
        (p.arrival, [(c.prompt, c.output) for c in p.calls]) for p in b
    ]


def test_shape_stats_report_what_the_generator_drew():
    s = shape_stats("sharegpt", 300)
    assert 5.0 < s["calls_mean"] < 9.0 and s["calls_max"] <= 80
    assert 200 < s["out_mean"] < 330 and 200 < s["user_mean"] < 310
    assert shape_stats("chat", 50)["user_mean"] == 0


def test_a_user_turn_has_about_the_asked_tokens_and_ends_with_the_question():
    questions = ["who wrote hamlet?"]
    filler = ["alpha, beta gamma. delta epsilon " * 20]
    text = user_turn(random.Random(1), questions, filler, 260, 1.3)
    assert text.endswith("who wrote hamlet?")
    # 200 counted tokens (words and punctuation marks, as engines.sim.text counts), give or take a word
    assert 200 <= count_tokens(text) <= 201
    assert user_turn(random.Random(1), questions, filler, 0, 1.3) == "who wrote hamlet?"
    assert user_turn(random.Random(1), questions, None, 260, 1.3) == "who wrote hamlet?"


def test_capacity_counts_the_tokens_decoded_while_the_budget_was_full():
    from bench.studies.sim.sim_programs import saturated_capacity

    log = [
        {"program": "p0", "output": 10, "end": 1.0},
        {"program": "p1", "output": 10, "end": 2.0},
        {"program": "p2", "output": 10, "end": 3.0},
        {"program": "p3", "output": 10, "end": 4.0},
        {"program": "p3", "output": 10, "end": 10.0},
    ]
    # 4 programs, budget 2: full until the 3rd program ended (t=3), 30 tokens by then; 12.5 tokens a program
    assert saturated_capacity(log, 4, 2) == 30 / 3 / 12.5
    assert saturated_capacity(log, 4, 8) == 4 / 10.0  # never full: programs / makespan


def test_bfcl_draws_its_published_statistics():
    s = shape_stats("bfcl", 600)
    assert 9.0 < s["calls_mean"] < 12.5 and s["calls_max"] <= 70
    assert 28 < s["out_mean"] < 40 and 650 < s["user_mean"] < 800


def test_mixed_samples_the_three_workloads_equally_with_one_arrival_process():
    from bench.studies.sim.program_setup import MIXED, programs

    progs = programs("mixed", 2.0, 900)
    kinds = [p.pid.split("-")[0] for p in progs]
    assert {k: kinds.count(k) for k in MIXED} == {
        k: kinds.count(k) for k in MIXED if 240 < kinds.count(k) < 360
    }
    assert len({p.pid for p in progs}) == len(progs)  # sharegpt and bfcl share a generator, not ids
    gaps = [b.arrival - a.arrival for a, b in zip(progs, progs[1:])]
    assert all(g >= 0 for g in gaps) and 0.4 < sum(gaps) / len(gaps) < 0.6  # Poisson at 2 programs/s
    assert [p.kind for p in progs if p.pid.startswith("lats")] == ["tree"] * kinds.count("lats")
    # the same programs at every rate: only arrivals change
    burst = programs("mixed", 0.0, 900)
    assert [(p.pid, p.calls) for p in burst] == [(p.pid, p.calls) for p in progs]
    assert all(p.arrival == 0.0 for p in burst)


def test_react_programs_are_tool_loops_with_pauses_and_recorded_answers():
    from bench.studies.programs.programs import recorded_lengths
    from teola.sim.program_workloads import react_program

    answers = recorded_lengths()
    assert len(answers) >= 100 and max(answers) <= 128
    progs = [
        react_program(f"r{i}", 0.0, random.Random(i), [20], max_steps=8, answers=answers) for i in range(400)
    ]
    steps = [len(p.calls) for p in progs]
    assert max(steps) <= 8 and min(steps) >= 1 and sum(s >= 5 for s in steps) > 0  # a tail up to the cap
    for p in progs:
        first, *rest = p.calls
        assert first.pause == 0 and first.parents == () and p.kind == "react"
        for i, (prev, c) in enumerate(zip(p.calls, rest)):
            assert c.parents == (i,) and 0 < c.pause <= 20.0 and 16 <= c.user <= 200
            assert c.prompt == prev.prompt + prev.output + c.user
        assert all(8 <= c.output <= 64 for c in p.calls[:-1]) and p.calls[-1].output in answers
    pauses = [c.pause for p in progs for c in p.calls[1:]]
    assert 1.0 < sum(pauses) / len(pauses) < 2.5  # ToolBench's mean 1.72 s, capped at 20 s
