"""Steady-state statistics of bench.studies.sim.sim_lamps on hand-made records: the measured window, batch
means and their interval, queue growth, the steady-state test and LAMPS' change with its interval."""

from __future__ import annotations

import math

import pytest

from bench.studies.sim.sim_lamps_report import (
    BATCHES,
    T_975_9,
    batch_means,
    change,
    in_window,
    interval,
    markdown,
    slope,
    steady,
    summarize,
)


def rec(arrival: float, latency: float, api: float = 1.0, queue: float = 0.5) -> dict:
    return {
        "arrival": arrival,
        "latency": latency,
        "api_s": api,
        "queue_s": queue,
        "handlings": ["swap", "preserve"],
    }


def test_only_requests_arriving_in_the_window_are_measured():
    done = [rec(t, 1.0) for t in (5.0, 10.0, 15.0, 29.9, 30.0)]
    assert [d["arrival"] for d in in_window(done, 10.0, 20.0)] == [10.0, 15.0, 29.9]


def test_batch_means_split_the_window_by_arrival():
    done = [rec(10.0 + i, float(i)) for i in range(20)]  # window [10, 30): two requests per 2 s batch
    assert batch_means(done, 10.0, 20.0) == [0.5 + 2 * b for b in range(BATCHES)]
    assert math.isnan(batch_means(done[:2], 10.0, 20.0)[5])


def test_interval_is_t_times_the_standard_error_of_the_batch_means():
    means = [1.0, 3.0] * 5
    sd = math.sqrt(sum((m - 2.0) ** 2 for m in means) / 9)
    assert interval(means) == pytest.approx(T_975_9 * sd / math.sqrt(10))
    assert math.isnan(interval(means[:9])) and math.isnan(interval([math.nan] + means[1:]))


def test_slope_and_steady_state():
    assert slope([0.0, 2.0, 4.0, 6.0], 1.0) == pytest.approx(2.0)
    assert slope([5.0], 1.0) == 0.0
    flat = [10.0, 12.0, 9.0, 11.0] * 25
    growing = [float(i) for i in range(100)]  # 1 call per second more: 100 over a 100 s window
    assert steady(flat, 1.0, 100.0, (10.0, 11.0), cap=64)
    assert not steady(growing, 1.0, 100.0, (10.0, 11.0), cap=64)
    assert not steady(flat, 1.0, 100.0, (10.0, 13.0), cap=64)  # E2E drifted 30%


def test_summarize_splits_latency_into_api_queueing_and_engine():
    done = [rec(10.0 + i, 4.0 + (i >= 10), api=1.0, queue=0.5) for i in range(20)]
    s = summarize(done, 10.0, 20.0)
    assert s["measured"] == 20 and s["mean_s"] == pytest.approx(4.5)
    assert (s["api_s"], s["queue_s"], s["engine_s"]) == pytest.approx((1.0, 0.5, 3.0))
    assert s["halves"] == pytest.approx((4.0, 5.0)) and s["handlings"] == {
        "preserve": 20,
        "discard": 0,
        "swap": 20,
    }
    empty = summarize([], 10.0, 20.0)
    assert empty["measured"] == 0 and math.isnan(empty["mean_s"])


def test_lamps_change_and_its_interval_come_from_paired_batch_means():
    lamps = {"mean_s": 6.0, "batch_means": [6.0] * BATCHES}
    fcfs = {"mean_s": 10.0, "batch_means": [10.0] * BATCHES}
    pct, hw = change(lamps, fcfs)
    assert pct == pytest.approx(-40.0) and hw == pytest.approx(0.0)


def test_the_page_names_an_overloaded_point():
    load = {
        "running": 64.0,
        "waiting": 900.0,
        "waiting_first": 100.0,
        "waiting_last": 2001.0,
        "preserved": 3.0,
        "kv_used": 0.5,
        "kv_max": 0.9,
        "busy": 1.0,
        "swap_share": 0.1,
        "overloaded_at": 350.0,
    }
    row = {
        "rate": 8.0,
        "system": "FCFS+INFERCEPT",
        "requests": 10,
        **summarize([], 300.0, 300.0),
        "load": load,
        "steady": False,
    }
    data = {
        "command": "python -m bench sim_lamps",
        "wall_s": 60.0,
        "profile": "p",
        "warmup": 300.0,
        "window": 300.0,
        "cooldown": 300.0,
        "mixes": {"toolbench": [row]},
    }
    page = markdown(data, 64, 2000)
    assert "overloaded: over 2000 calls waiting 50 s into the window" in page and "SIMULATED" in page
