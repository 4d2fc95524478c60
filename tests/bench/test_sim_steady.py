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
    progs = [
        SimpleNamespace(pid=f"p{i}", arrival=a, calls=[1])
        for i, a in enumerate((1.0, 9.9, 10.0, 29.9, 30.0, 34.0))
    ]
    # the warm-up's and cool-down's programs are very slow: they must not move the measured mean
    lats = [1000.0, 1000.0, 4.0, 6.0, 1000.0, None]
    log = [{"program": p.pid, "output": 10} for p in progs]
    s = programs.summarize(progs, lats, log, trace)
    assert s["measured"] == 2 and s["unfinished"] == 0
    assert s["mean"] == pytest.approx(5.0)
    assert s["tok_mean"] == pytest.approx(0.5)


def test_an_unfinished_measured_program_makes_the_point_overloaded() -> None:
    trace = Trace(0.0, 10.0, 0.0)
    progs = [
        SimpleNamespace(pid="a", arrival=1.0, calls=[1]),
        SimpleNamespace(pid="b", arrival=2.0, calls=[1]),
    ]
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
    """A quick simulated point (ShareGPT, vLLM-opt, a light load, 150 s of arrivals: 39 programs, 23
    measured; 300 s took 5x the CPU for the same checks): the measured programs all finish, the
    warm-up's are excluded, and the window is at steady state."""
    import bench.studies.sim.sim_autellix as sim_autellix

    cap = sim_autellix.capacity_estimate(sim_autellix._profile(sim_autellix.PROFILE), "sharegpt")
    r = programs.run_point(
        {
            "kind": "sharegpt",
            "system": "vllm-opt",
            "load": 0.3,
            "rate": 0.3 * cap,
            "profile": sim_autellix.PROFILE,
            "trace": (30.0, 120.0, 30.0),
            "overdue": 20.0,
        }
    )
    assert 0 < r["measured"] < r["programs"]
    assert r["unfinished"] == 0 and math.isfinite(r["mean"])
    assert r["steady"]


def test_a_sweep_stops_at_the_knee_and_reads_only_cached_points(tmp_path) -> None:
    """system_sweep climbs the grid until the latency passes KNEE x unloaded; with `only` it runs nothing
    and stops at the first point the cache lacks."""
    import json

    import bench.studies.sim.sim_steady as sim_steady

    jobs = [
        {"study": "lamps", "kind": "single", "system": "LAMPS", "load": g, "rate": g, "trace": [1, 2, 3]}
        for g in (1.0, 2.0, 3.0, 4.0)
    ]
    cache = tmp_path / "points.jsonl"
    lat = {1.0: 10.0, 2.0: 20.0, 3.0: 80.0}  # unloaded 10 s: the knee (5x) is passed at rate 3
    cache.write_text(
        "".join(
            json.dumps({"key": sim_steady.key(j), "row": {"rate": j["rate"], "mean": lat[j["rate"]]}}) + "\n"
            for j in jobs[:3]
        )
    )
    rows = sim_steady.system_sweep((jobs, 10.0, "mean", str(cache), True))
    assert [r["rate"] for r in rows] == [1.0, 2.0, 3.0]  # stopped at the knee, rate 4 never asked for
    rows = sim_steady.system_sweep((jobs, 100.0, "mean", str(cache), True))
    assert [r["rate"] for r in rows] == [
        1.0,
        2.0,
        3.0,
    ]  # below the knee: stops where the cache ends, runs nothing
    cache.write_text(cache.read_text().splitlines(keepends=True)[0])
    assert len(sim_steady.system_sweep((jobs, 100.0, "mean", str(cache), True))) == 1


def test_a_program_is_overdue_by_its_own_unloaded_latency_not_the_workloads_mean() -> None:
    """Hand-computed. Window [0, 10) s, the workload's unloaded mean 5 s. Program a (arrives at 1 s,
    1 s alone) is still running at 30 s: 30x its own length, overdue since 1 + 20 x 1 = 21 s. Program b
    (arrives at 2 s, 20 s alone: the heavy tail) is still running at 150 s: 7.4x, not overdue until
    2 + 20 x 20 = 402 s. The previous rule (every program's limit the trace's end + 20 x the workload's
    mean: 10 + 100 = 110 s) gave the opposite verdicts: a not overdue at 30 s, b overdue at 150 s."""
    from bench.studies.sim.steady_state import deadlines, overdue

    arrivals, solos = [1.0, 2.0], [1.0, 20.0]
    assert deadlines(arrivals, solos, 20.0) == [21.0, 402.0]
    assert overdue(arrivals, [None, None], solos, at=30.0) == [0]
    assert overdue(arrivals, [25.0, None], solos, at=150.0) == []  # a ended at 25 s: late, but not running
    assert overdue(arrivals, [5.0, None], solos, at=150.0) == []
    assert overdue(arrivals, [5.0, None], solos, at=402.0) == [1]
    # with the workload's mean own latency (5 s) as a floor, a (1 s alone) is overdue at 1 + 20 x 5 = 101 s
    assert deadlines(arrivals, solos, 20.0, floor=5.0) == [101.0, 402.0]
    assert overdue(arrivals, [None, None], solos, at=30.0, floor=5.0) == []
    assert overdue(arrivals, [None, None], solos, at=101.0, floor=5.0) == [0]


def test_watch_stops_at_the_first_overdue_program_in_virtual_time() -> None:
    """Two measured programs end at 5 s and 50 s (virtual); deadlines 21 s and 402 s: all finish, no
    stop. With the first one ending at 30 s instead, the run stops at its deadline, 21 s."""
    import asyncio

    from teola.sim.virtual_loop import run_virtual

    async def scenario(ends: list[float], due: list[float]) -> float | None:
        tasks = [asyncio.ensure_future(asyncio.sleep(e)) for e in ends]
        t0 = asyncio.get_running_loop().time()
        stopped = await programs.watch(tasks, [t0 + d for d in due])
        for t in tasks:
            t.cancel()
        return None if stopped is None else stopped - t0

    assert run_virtual(scenario([5.0, 50.0], [21.0, 402.0])) is None
    assert run_virtual(scenario([30.0, 50.0], [21.0, 402.0])) == pytest.approx(21.0)


def test_warmup_covers_the_heavy_tail_of_the_programs_own_latencies() -> None:
    """Hand-computed. Latencies 1, 1, 1, 1, 16 s (mean 4): E[min(L, t)] = (4 + t) / 5 for t in
    [1, 16], 95% of 4 = 3.8 at t = 15 s. The previous warm-up (3 x the unloaded mean, 12 s) leaves
    the number in the system at (4 + 12) / 5 / 4 = 80% of its settled value; the warm-up is now at
    least KNEE x 15 = 75 s."""
    from bench.studies.sim.steady_state import KNEE, cover, in_system

    lats = [1.0, 1.0, 1.0, 1.0, 16.0]
    assert cover(lats) == pytest.approx(15.0)
    assert cover(lats, 1.0) == pytest.approx(16.0)
    assert trace_for(4.0).warmup == 12.0
    assert trace_for(4.0, settle=KNEE * cover(lats)).warmup == pytest.approx(75.0)
    # arrivals every 0.1 s, latencies cycling through the five: settled, 0.1 s x 4 s mean = 40 in the system
    arrivals = [0.1 * i for i in range(2000)]
    ends: list[float | None] = [a + lats[i % 5] for i, a in enumerate(arrivals)]
    assert in_system(arrivals, ends, 11.95) == pytest.approx(0.8 * 40, abs=1)
    assert in_system(arrivals, ends, 74.95) == pytest.approx(40, abs=1)


def test_solo_latency_hand_computed() -> None:
    """A cost of 1 ms per prefilled token and 10 ms per decoding sequence. Chat: 100-token prompt
    (0.1 s) + 10 decode steps (0.1 s), then a 50-token user turn (0.05 s) + 5 steps (0.05 s): 0.3 s.
    Tree: two 20-token calls (40 tokens: 0.04 s) decoding 3 and 5 tokens (2 steps at batch 2 at 20 ms,
    2 at batch 1 at 10 ms: 0.06 s), then one call on their 8 output tokens + 20 (0.028 s): 0.128 s."""
    from bench.studies.sim.sim_steady_solo import solo_latency
    from engines.sim.cost import IterationCost
    from teola.sim.program_workloads import CallSpec, ProgramSpec

    cost = IterationCost(prefill_token=0.001, decode_seq=0.01)
    chat = ProgramSpec("c", 0.0, [CallSpec(100, 11), CallSpec(161, 6, (0,), 50)], "chat")
    assert solo_latency(chat, cost) == pytest.approx(0.3)
    tree = ProgramSpec("t", 0.0, [CallSpec(20, 3), CallSpec(20, 5), CallSpec(20, 1, (0, 1))], "tree")
    assert solo_latency(tree, cost) == pytest.approx(0.128)
    react = ProgramSpec("r", 0.0, [CallSpec(100, 11), CallSpec(161, 6, (0,), 50, pause=2.0)], "react")
    assert solo_latency(react, cost) == pytest.approx(2.3)


def test_interleaved_sweeps_stop_each_system_at_its_knee_from_the_cache(tmp_path) -> None:
    """Two systems, every point cached: each sweep ends at its own knee (unloaded 10 s, knee 50 s):
    A at rate 2 (80 s), B at rate 3 (60 s); nothing is run (the cache holds every point asked for)."""
    import json

    import bench.studies.sim.sim_steady as sim_steady

    lat = {"A": {1.0: 10.0, 2.0: 80.0, 3.0: 90.0}, "B": {1.0: 10.0, 2.0: 20.0, 3.0: 60.0}}
    jobs = {
        s: [
            {"study": "lamps", "kind": "single", "system": s, "load": g, "rate": g, "trace": [1, 2, 3]}
            for g in (1.0, 2.0, 3.0)
        ]
        for s in lat
    }
    cache = tmp_path / "points.jsonl"
    cache.write_text(
        "".join(
            json.dumps({"key": sim_steady.key(j), "row": {"rate": j["rate"], "mean": lat[s][j["rate"]]}})
            + "\n"
            for s in lat
            for j in jobs[s]
        )
    )
    rows = sim_steady.interleaved_sweeps([(jobs[s], 10.0, "mean", str(cache), False) for s in lat], 2)
    assert [[r["rate"] for r in rs] for rs in rows] == [[1.0, 2.0], [1.0, 2.0, 3.0]]


def test_loads_option_picks_grid_points_in_climbing_order() -> None:
    import argparse

    import pytest

    from bench.studies.sim.sim_steady import loads_of

    assert loads_of("1.25,1.0") == (1.0, 1.25)
    for bad in ("x", "0", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            loads_of(bad)


def test_vllm_opt_is_not_held_back_by_teolas_token_budget_and_the_program_policies_are() -> None:
    """S10's vLLM-opt queues in the engine (as vLLM does); PLAS / MLFQ admit by the engine's KV."""
    from bench.studies.sim.sim_steady_programs import UNGATED, token_budget_of

    assert token_budget_of("fcfs") == UNGATED
    assert token_budget_of("plas") == token_budget_of("mlfq") == 0


def test_the_level_probe_counts_calls_running_and_service_per_queue() -> None:
    """Two samples of PLAS's queues: call "a" in Q0 running with no service yet, call "b" in Q3
    waiting with 2.0 s of service, then "b" with 4.0 s: Q0 1 call (1 running), 0.0 s; Q3 1 call
    (0 running), mean service (2 + 4) / 2 = 3.0 s, starting where the policy's levels say. FCFS has
    no queues: nothing."""
    from types import SimpleNamespace

    from bench.studies.sim.sim_steady_levels import LevelProbe
    from teola.scheduling.registry import make_policy

    policy = make_policy("plas")
    core = policy.core
    core.admit("a", "p1", "c1", 0.0)
    core.admit("b", "p2", "c2", 0.0)
    core.calls["b"].level, core.calls["b"].service = 3, 2.0
    sched = SimpleNamespace(
        policy=policy, preemptor=SimpleNamespace(calls={"inst": {"a": SimpleNamespace(stopping=False)}})
    )
    probe = LevelProbe()
    probe.sample(sched)
    core.calls["b"].service = 4.0
    probe.sample(sched)
    assert probe.summary() == {
        "0": {"from": 0.0, "calls": 1.0, "running": 1.0, "service": 0.0},
        "3": {"from": core.levels.lows[3], "calls": 1.0, "running": 0.0, "service": 3.0},
    }
    fcfs = LevelProbe()
    fcfs.sample(SimpleNamespace(policy=make_policy("fcfs"), preemptor=None))
    assert fcfs.summary() == {}
