"""bench.studies.programs.programs_heavy's reduction of trials to a table: trial means with their range,
summed counters, and throughput at equal latency from the trial means (hand-computed rows)."""

from __future__ import annotations

import pytest

from bench.studies.programs.programs_heavy import equal_latency, markdown, summary


def _row(trial: int, load: float, policy: str, mean: float, p99: float, pre: int = 0) -> dict:
    return {
        "trial": trial,
        "load": load,
        "rate": load * 2.0,
        "policy": policy,
        "mean": mean,
        "p99": p99,
        "throughput": 1.0,
        "preemptions": pre,
        "resumed_tokens": 10 * pre,
        "resumed_cached_tokens": 5 * pre,
        "resumed_unrun": pre // 2,
        "calls": 30,
        "output_tokens": 700,
    }


ROWS = [
    _row(t, load, p, m + t, 2 * (m + t), pre)
    for t in (0, 1)
    for load, p, m, pre in (
        (0.5, "fcfs", 4.0, 0),
        (0.5, "plas", 3.0, 2),
        (0.5, "atlas", 3.0, 1),
        (1.0, "fcfs", 10.0, 0),
        (1.0, "plas", 5.0, 4),
        (1.0, "atlas", 6.0, 3),
    )
]


def test_trials_reduce_to_means_with_their_range_and_summed_counters():
    s = {(r["load"], r["policy"]): r for r in summary(ROWS)}
    fifo = s[(0.5, "fcfs")]
    assert fifo["mean"] == pytest.approx(4.5) and fifo["mean_range"] == (4.0, 5.0)
    assert fifo["p99"] == pytest.approx(9.0) and fifo["trials"] == 2
    assert s[(1.0, "plas")]["preemptions"] == 8 and s[(1.0, "plas")]["resumed_cached_tokens"] == 40


def test_throughput_at_equal_latency_uses_the_trial_means():
    e = equal_latency(summary(ROWS))
    # target 1.5 x 4.5 = 6.75 s; FCFS: 4.5 s at rate 1, 10.5 s at rate 2 -> 1 + (6.75 - 4.5) / 6 = 1.375
    assert e["target"] == pytest.approx(6.75)
    assert e["rates"]["fcfs"] == pytest.approx(1.375)
    # PLAS (3.5 s, 5.5 s) and ATLAS (3.5 s, 6.5 s) still meet it at the highest rate: credited 2.0, not more
    assert e["rates"]["plas"] == pytest.approx(2.0) and e["ratios"]["atlas"] == pytest.approx(2.0 / 1.375)


def page(rows: list[dict]) -> dict:
    """A page's data around these rows (what bench.studies.programs.programs_heavy.main writes)."""
    return {
        "burst": {"programs": 4, "wall": 3.0, "calls": 9, "output_tokens": 100},
        "command": "c",
        "wall_s": 60.0,
        "commit": "abc",
        "load": (0.5, 1.5),
        "kind": "chat",
        "programs": 4,
        "text_source": "t",
        "capacity": 2.0,
        "seed": 1,
        "summary": summary(rows),
        "equal_latency": equal_latency(summary(rows)),
    }


def test_the_table_names_fcfs_and_the_target():
    data = page(ROWS)
    text = markdown(data)
    assert "| 0.50 | 1.000 | fcfs | 2 | 4.50 (4.00-5.00)" in text
    assert "ATLAS/FCFS 1.455" in text and "ATLAS >= 2x FCFS" in text
    assert "FCFS: policy `fcfs`" in text


def test_pages_run_against_the_fifo_strawman_say_so_and_use_it_as_the_base():
    rows = [dict(r, policy="fifo") if r["policy"] == "fcfs" else r for r in ROWS]
    data = page(rows)
    text = markdown(data)
    assert "| 0.50 | 1.000 | fcfs (fifo batches) | 2 | 4.50 (4.00-5.00)" in text
    assert "FCFS: teola's `fifo` batching strawman" in text and "ATLAS/FCFS 1.455" in text


def test_the_table_says_whether_kv_swap_was_on_and_counts_tokens_loaded_from_host():
    rows = [dict(r, resumed_swapped_tokens=3 * r["preemptions"]) for r in ROWS]
    data = page(rows)
    assert "KV swap on preemption: off" in markdown(data)
    assert "connector saves" not in markdown(data)
    rows = [
        dict(
            r,
            swap_saves=r["preemptions"],
            swap_saves_declined=1,
            swap_loads=2,
            swap_loaded_tokens=7,
            swap_seconds_out=0.004,
            swap_seconds_in=0.001,
        )
        for r in rows
    ]
    data = {**data, "summary": summary(rows), "kv_swap": True}
    text = markdown(data)
    assert "KV swap on preemption: on" in text and "2 trial(s)" in text
    # PLAS at load 1.0: 8 preemptions over two trials; 80 re-sent - 40 not computed (24 of them loaded
    # from host) = 40 recomputed; the connector's counters summed over the trials
    assert (
        "| 8 (4) | 80 (40; 24) | 40 | 8 (2) | 4 (14) | 8 / 2 |" in text
    )  # 2 + 2 runs stopped before they ran


def test_connector_counts_are_per_run_differences():
    from bench.studies.programs.programs_heavy import swap_counts

    before = {
        "saves": 3,
        "saves_declined": 1,
        "loads": 2,
        "loaded_tokens": 40,
        "seconds_out": 0.5,
        "seconds_in": 0.25,
    }
    after = {
        "saves": 5,
        "saves_declined": 1,
        "loads": 4,
        "loaded_tokens": 70,
        "seconds_out": 0.75,
        "seconds_in": 0.5,
    }
    assert swap_counts(before, after) == {
        "swap_saves": 2,
        "swap_saves_declined": 0,
        "swap_loads": 2,
        "swap_loaded_tokens": 30,
        "swap_seconds_out": 0.25,
        "swap_seconds_in": 0.25,
    }


def test_a_page_older_than_its_counters_renders_them_as_not_available():
    """Pages written before resumed_unrun and resumed_swapped_tokens were counted
    (bench/results/programs/programs_heavy.json) keep their other columns; the missing counters read "n/a"."""
    data = page(ROWS)
    old = [
        {k: v for k, v in r.items() if k not in ("resumed_swapped_tokens", "resumed_unrun")}
        for r in data["summary"]
    ]
    text = markdown({**data, "summary": old})
    # PLAS at load 1.0: 8 preemptions, 80 re-sent tokens, 40 of them from the prefix cache, 40 recomputed
    assert "| 8 (n/a) | 80 (40; n/a) | 40 |" in text


def test_knee_readings_interpolate_each_policy_at_multiples_of_the_unloaded_mean():
    from bench.studies.programs.programs_heavy_page import knee_readings

    # trial means (rates 1 and 2): fcfs 4.5 / 10.5 s, plas 3.5 / 5.5 s, atlas 3.5 / 6.5 s; unloaded 2.0 s
    k = {r["factor"]: r for r in knee_readings(summary(ROWS), 2.0)}
    # 2x = 4 s: FCFS misses it at the lowest rate (none); PLAS 1 + (4 - 3.5) / 2 = 1.25; ATLAS 1 + 0.5 / 3
    assert k[2.0]["rates"]["fcfs"] is None and k[2.0]["ratios"]["plas"] is None
    assert k[2.0]["rates"]["plas"] == pytest.approx(1.25)
    assert k[2.0]["rates"]["atlas"] == pytest.approx(1 + 0.5 / 3)
    # 3x = 6 s: FCFS 1 + 1.5 / 6 = 1.25; PLAS meets it at the highest rate, credited 2.0
    assert k[3.0]["rates"]["fcfs"] == pytest.approx(1.25)
    assert k[3.0]["ratios"]["plas"] == pytest.approx(2.0 / 1.25)
    assert k[3.0]["ratios"]["atlas"] == pytest.approx((1 + 2.5 / 3) / 1.25)


def test_a_page_with_an_unloaded_mean_shows_the_multiple_and_the_knee_table():
    rows = ROWS + [dict(r, policy="mlfq") for r in ROWS if r["policy"] == "plas"]
    data = {**page(rows), "rules": "paper", "unloaded": {"programs": 3, "mean": 2.0, "min": 1.0, "max": 3.0}}
    text = markdown(data)
    assert "mean 2.00 s (min 1.00, max 3.00)" in text and "Autellix's rules" in text
    # FCFS at load 1.0: 10.5 s over the unloaded 2.0 s
    assert "| 1.00 | 2.000 | fcfs | 2 | 10.50 (10.00-11.00) | 5.2x |" in text
    assert "| 3x unloaded = 6.00 s | 1.250 | 2.000 | 2.000 | 1.833 | 1.600 | 1.600 | 1.467 |" in text


def test_rules_give_the_program_policies_their_defaults_or_the_token_deviation():
    from bench.studies.programs.programs_heavy_setup import rule_options
    from teola.sim.program_runs import QUEUES

    assert rule_options("atlas", "paper") == {} and rule_options("fcfs", "tokens") == {}
    assert rule_options("plas", "tokens") == {**QUEUES, "quanta": "fixed"}
    with pytest.raises(ValueError, match="unknown rules 'fast'"):
        rule_options("plas", "fast")


def test_runs_hold_as_many_programs_as_arrive_in_the_span_of_unloaded_means():
    from bench.studies.programs.programs_heavy import Plan, programs_at

    # 10 unloaded means of 2.22 s at 2.06 programs/s: 10 x 2.22 x 2.06 = 45.7 -> 46 programs
    assert programs_at(Plan(), 2.06, 2.22) == 46
    assert programs_at(Plan(), 0.1, 2.22) == 8  # never fewer than 8
    assert programs_at(Plan(span=0), 2.06, 2.22) == 30  # --span 0: --programs
    assert programs_at(Plan(), 2.06, None) == 30  # no unloaded mean measured


def test_a_page_says_how_many_programs_each_load_ran_and_what_service_was_charged_from():
    rows = [dict(r, programs=int(20 * r["load"])) for r in ROWS]
    rows = [dict(r, charged_executor=5, charged_wall=1) if r["policy"] != "fcfs" else r for r in rows]
    data = {**page(rows), "rules": "paper", "span": 10.0}
    text = markdown(data)
    assert (
        "as many programs as arrive in 10x the unloaded mean at its rate (load 0.5: 10, load 1: 20)" in text
    )
    # plas and atlas, 2 loads x 2 trials each: 8 runs of 5 and 1
    assert "executor time (its request stats: first scheduling to latest token): 40;" in text
    assert "(`wall-time-service`, requests vLLM preempted itself): 8." in text
    old = markdown({**page(ROWS), "rules": "paper"})
    assert "4 programs per run" in old and "vLLM reported no executor time then" in old


def test_without_preemption_the_program_policies_get_preempt_false_and_the_page_says_so():
    from bench.studies.programs.programs_heavy_setup import rule_options

    assert rule_options("atlas", "paper", preempt=False) == {"preempt": False}
    assert rule_options("fcfs", "paper", preempt=False) == {}
    data = {**page(ROWS), "rules": "paper"}
    assert "anti-starvation beta 8, preemption on, a promoted call preempting from the top queue" in markdown(
        data
    )
    assert "preemption off (`preempt=False`" in markdown({**data, "preempt": False})


def test_promotion_admit_reaches_the_policy_and_the_page_counts_promotions_per_program_policy():
    from bench.studies.programs.programs_heavy_setup import rule_options

    assert rule_options("atlas", "paper", promotion="admit") == {"promotion": "admit"}
    assert rule_options("plas", "paper") == {}
    assert rule_options("fcfs", "paper", promotion="admit") == {}
    with pytest.raises(ValueError, match="unknown promotion 'top'"):
        rule_options("atlas", "paper", promotion="top")
    # plas promoted 3 and 4 calls in its two trials at each load, atlas 1 and 0: summed per (load, policy)
    counted = {"plas": (3, 4), "atlas": (1, 0)}
    rows = [
        dict(r, promotions=counted[r["policy"]][r["trial"]]) if r["policy"] in counted else r for r in ROWS
    ]
    # PLAS's preemptions by cause (KV, better queue, promoted call): trial 0 (0, 1, 1), trial 1 (1, 0, 1);
    # ATLAS's rows stand for a page older than the count
    causes = ((0, 1, 1), (1, 0, 1))
    for r in rows:
        if r["policy"] == "plas":
            r.update(zip(("preempted_kv", "preempted_ranked", "preempted_promoted"), causes[r["trial"]]))
    s = {(r["load"], r["policy"]): r for r in summary(rows)}
    assert s[(1.0, "plas")]["promotions"] == 7 and s[(0.5, "atlas")]["promotions"] == 1
    assert "promotions" not in s[(1.0, "fcfs")]
    text = markdown({**page(rows), "rules": "paper", "promotion": "admit"})
    assert '`promotion="admit"` (a call anti-starvation promotes is admitted first' in text
    assert "| anti-starvation promotions |" in text
    # the load 0.5 PLAS row: 4 preemptions over two trials (2 of the resumed runs unrun), 7 promotions
    assert "| 4 (2) | 7 | 1 / 1 / 2 |" in text and "| 0 (0) | - | - |" in text
    assert "| 2 (0) | 1 | n/a |" in text  # ATLAS at load 0.5: 1 + 1 preemptions, 1 + 0 promotions


def test_a_run_at_one_load_reads_no_throughput_at_equal_latency():
    """One load is no curve: the page says so instead of crediting every policy with that rate."""
    rows = [r for r in ROWS if r["load"] == 1.0]
    text = markdown({**page(rows), "rules": "paper"})
    assert "not read: the run has one load" in text
    assert "Across the knee" not in text and "ATLAS/FCFS" not in text
