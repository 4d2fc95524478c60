"""The steady-state study's rules (bench/studies/sim/steady_state.py) and a quick simulated point:
the warm-up and cool-down are excluded, the knee is read on a hand-built curve, and a short trace at
a light load reaches steady state while a growing queue does not."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

import bench.studies.sim.sim_steady_programs as programs
from bench.studies.sim.steady_state import Trace, crossing, equal_latency, past_knee, steady, trace_for


def test_trace_scales_with_unloaded_latency_and_keeps_minimums() -> None:
    t = trace_for(20.0)
    assert (t.warmup, t.window, t.cooldown) == (60.0, 200.0, 40.0)
    assert t.horizon == 300.0
    t = trace_for(12.0, min_warmup=300, min_window=1800, min_cooldown=300)
    assert (t.warmup, t.window, t.cooldown) == (300, 1800, 300)
    with pytest.raises(ValueError, match="unloaded mean latency"):
        trace_for(0.0)


def test_warmup_and_cooldown_arrivals_are_not_measured() -> None:
    trace = Trace(10.0, 20.0, 5.0)
    progs = [SimpleNamespace(pid=f"p{i}", arrival=a, calls=[1]) for i, a in enumerate((1.0, 9.9, 10.0, 29.9, 30.0, 34.0))]
    # the warm-up's and cool-down's programs are very slow: they must not move the measured mean
    lats = [1000.0, 1000.0, 4.0, 6.0, 1000.0, None]
    log = [{"program": p.pid, "output": 10} for p in progs]
    s = programs.summarize(progs, lats, log, trace)
    assert s["measured"] == 2 and s["unfinished"] == 0
    assert s["mean"] == pytest.approx(5.0)
    assert s["tok_mean"] == pytest.approx(0.5)


def test_an_unfinished_measured_program_makes_the_point_overloaded() -> None:
    trace = Trace(0.0, 10.0, 0.0)
    progs = [SimpleNamespace(pid="a", arrival=1.0, calls=[1]), SimpleNamespace(pid="b", arrival=2.0, calls=[1])]
    s = programs.summarize(progs, [3.0, None], [{"program": "a", "output": 3}], trace)
    assert s["unfinished"] == 1 and math.isinf(s["mean"]) and math.isinf(s["tok_mean"])
    assert past_knee(s["mean"], 1.0)


def test_knee_reading_on_a_hand_built_curve() -> None:
    base = [(1.0, 1.0), (2.0, 2.0), (3.0, 10.0)]
    fast = [(1.0, 1.0), (2.0, 1.0), (4.0, 3.0), (6.0, math.inf)]
    # base crosses 4 between 2 (2.0) and 3 (10.0): 2 + (4 - 2) / 8 = 2.25; fast between 2 and 4 at 3.0 ... 4.0
    assert crossing(base, 4.0) == (pytest.approx(2.25), False)
    assert crossing(fast, 2.0) == (pytest.approx(3.0), False)
    # into an overloaded point: read at the last finite point, as a lower bound
    assert crossing(fast, 5.0) == (4.0, True)
    assert crossing(base, 0.5) == (None, False)  # over the target from the first point
    assert crossing(base, 50.0) == (3.0, True)  # never crossed: a lower bound
    read = equal_latency({"base": base, "fast": fast}, "base", 4.0)
    assert read["fast"]["ratio"] == pytest.approx(4.0 / 2.25)
    assert read["fast"]["ratio_note"] == ">="


def test_steady_test_tells_a_flat_queue_from_a_growing_one() -> None:
    trace = Trace(0.0, 100.0, 0.0)
    arrivals = [float(t) for t in range(100)]
    flat = steady(arrivals, [a + 5.0 for a in arrivals], trace)
    growing = steady(arrivals, [a + 2.0 * a for a in arrivals], trace)  # each waits longer than the last
    assert flat["steady"] and not growing["steady"]
    assert growing["in_system_last"] > 2 * growing["in_system_first"]


def test_a_short_light_trace_reaches_steady_state() -> None:
    """A quick simulated point (ShareGPT, vLLM-opt, a light load, 300 s of arrivals): the measured
    programs all finish, the warm-up's are excluded, and the window is at steady state."""
    import bench.studies.sim.sim_autellix as sim_autellix

    cap = sim_autellix.capacity_estimate(sim_autellix._profile(sim_autellix.PROFILE), "sharegpt")
    r = programs.run_point({"kind": "sharegpt", "system": "vllm-opt", "load": 0.3, "rate": 0.3 * cap,
                            "profile": sim_autellix.PROFILE, "trace": (60.0, 240.0, 30.0), "limit": 600.0})
    assert 0 < r["measured"] < r["programs"]
    assert r["unfinished"] == 0 and math.isfinite(r["mean"])
    assert r["steady"]


def test_a_sweep_stops_at_the_knee_and_reads_only_cached_points(tmp_path) -> None:
    """system_sweep climbs the grid until the latency passes KNEE x unloaded; with `only` it runs nothing
    and stops at the first point the cache lacks."""
    import json

    import bench.studies.sim.sim_steady as sim_steady

    jobs = [{"study": "lamps", "kind": "single", "system": "LAMPS", "load": g, "rate": g, "trace": [1, 2, 3]}
            for g in (1.0, 2.0, 3.0, 4.0)]
    cache = tmp_path / "points.jsonl"
    lat = {1.0: 10.0, 2.0: 20.0, 3.0: 80.0}  # unloaded 10 s: the knee (5x) is passed at rate 3
    cache.write_text("".join(json.dumps({"key": sim_steady.key(j), "row": {"rate": j["rate"], "mean": lat[j["rate"]]}}) + "\n"
                             for j in jobs[:3]))
    rows = sim_steady.system_sweep((jobs, 10.0, "mean", str(cache), True))
    assert [r["rate"] for r in rows] == [1.0, 2.0, 3.0]  # stopped at the knee, rate 4 never asked for
    rows = sim_steady.system_sweep((jobs, 100.0, "mean", str(cache), True))
    assert [r["rate"] for r in rows] == [1.0, 2.0, 3.0]  # below the knee: stops where the cache ends, runs nothing
    cache.write_text(cache.read_text().splitlines(keepends=True)[0])
    assert len(sim_steady.system_sweep((jobs, 100.0, "mean", str(cache), True))) == 1
