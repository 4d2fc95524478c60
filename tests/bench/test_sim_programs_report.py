"""bench.studies.sim.sim_programs' page: a policy still under the latency target at the highest rate swept is
marked as a lower bound, and only then."""

from __future__ import annotations

from bench.studies.sim.sim_programs_page import markdown


def _data(atlas_rate: float) -> dict:
    rows = [
        {
            "load": load,
            "rate": rate,
            "policy": p,
            "mean": m,
            "p50": m,
            "p95": m,
            "p99": m,
            "preemptions": 0,
            "resumed_tokens": 0,
            "resumed_cached_tokens": 0,
        }
        for load, rate in ((1.0, 2.0), (2.0, 4.0))
        for p, m in (("fifo", 3.0 * load), ("mlfq", 2.0), ("plas", 2.0), ("atlas", 2.0))
    ]
    sweep = {
        "capacity": 2.0,
        "rows": rows,
        "target_s": 4.5,
        "rate_at_target": {"fifo": 3.0, "mlfq": 3.0, "plas": 3.0, "atlas": atlas_rate},
    }
    return {
        "profile": "p",
        "programs": 10,
        "sweeps": {"chat|1|recompute": sweep},
        "loads": (1.0, 2.0),
        "out": "sim_programs",
        "wall_s": 6.0,
        "command": "c",
    }


def test_a_rate_at_the_top_of_the_sweep_is_marked_a_lower_bound():
    text = markdown(_data(4.0))
    assert "atlas >= 1.33x" in text and "lower bound" in text
    assert "mlfq 1.00x" in text


def test_the_page_says_which_fcfs_it_ran():
    assert "FCFS here is teola's `fifo` batching strawman" in markdown(
        _data(4.0)
    )  # a page without "baseline"
    data = _data(4.0)
    sweep = data["sweeps"]["chat|1|recompute"]
    sweep["rows"] = [dict(r, policy="fcfs") if r["policy"] == "fifo" else r for r in sweep["rows"]]
    sweep["rate_at_target"]["fcfs"] = sweep["rate_at_target"].pop("fifo")
    text = markdown({**data, "sweeps": {"chat|1|recompute": {**sweep, "baseline": "fcfs"}}})
    assert "FCFS here is policy `fcfs`" in text and "atlas >= 1.33x" in text


def test_no_mark_when_every_rate_is_interpolated():
    assert "lower bound" not in markdown(_data(3.5)) and "atlas 1.17x" in markdown(_data(3.5))
