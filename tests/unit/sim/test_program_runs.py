"""teola.sim.program_runs and program_workloads: the program harness every program study shares,
here in virtual time on a simulated vLLM instance, and its arithmetic on hand-made rows."""

from __future__ import annotations

import pytest

from teola.sim.program_runs import percentile, policy_options, rate_at, rates_at_target, run_set
from teola.sim.program_workloads import CallSpec, ProgramSpec, workload

ROWS = [
    {"policy": "fcfs", "rate": 1.0, "mean": 2.0},
    {"policy": "fcfs", "rate": 2.0, "mean": 4.0},
    {"policy": "atlas", "rate": 1.0, "mean": 2.5},
    {"policy": "atlas", "rate": 2.0, "mean": 3.5},
    {"policy": "plas", "rate": 1.0, "mean": 5.0},
]


def test_throughput_at_equal_latency_interpolates_between_swept_rates():
    # target 1.5 x fcfs's lowest mean (2.0) = 3.0 s: fcfs reaches it half way from 1 to 2 (2.0 -> 4.0),
    # atlas at 1 + (3.0 - 2.5) / (3.5 - 2.5) = 1.5; plas misses it at its lowest rate
    target, rates = rates_at_target(ROWS, ("fcfs", "atlas", "plas"), "fcfs")
    assert target == 3.0 and rates == {"fcfs": 1.5, "atlas": 1.5, "plas": None}
    assert (
        rate_at(ROWS, "atlas", 4.0) == 2.0
    )  # within target at every swept rate: the highest one, no extrapolation


def test_percentile_and_policy_options():
    assert percentile([4.0, 1.0, 2.0, 3.0], 50) == 2.5 and percentile([], 99) != percentile([], 99)  # nan
    assert policy_options("fcfs", promotion="admit") == {}
    assert policy_options("atlas", promotion="admit")["promotion"] == "admit"
    assert policy_options("atlas")["service"] == "tokens"


def test_a_program_set_runs_to_completion_in_virtual_time():
    from engines.sim.profile import load_profile
    from teola import Engine
    from teola.runtime import Runtime
    from teola.sim.virtual_loop import run_virtual

    # a chat of two sequential calls and a tree whose third call waits for the first two
    progs = [
        ProgramSpec("c", 0.0, [CallSpec(10, 5), CallSpec(20, 7, (0,))], "chat"),
        ProgramSpec("t", 0.5, [CallSpec(10, 3), CallSpec(10, 4), CallSpec(10, 6, (0, 1))], "tree"),
    ]

    async def scenario() -> dict:
        rt = Runtime({"llm": Engine("llm", kind="vllm", simulate=load_profile("a100-llama2-7b-measured"))})
        await rt.start()
        try:
            return await run_set(rt, progs, "t", ["What is the capital of France?"], keep_log=True)
        finally:
            await rt.stop()

    r = run_virtual(scenario())
    assert (r["programs"], r["calls"], r["output_tokens"]) == (2, 5, 5 + 7 + 3 + 4 + 6)  # exact lengths
    ends = {(c["program"], c["call"]): c["end"] for c in r["log"]}
    assert ends[("c", 1)] > ends[("c", 0)] and ends[("t", 2)] > max(ends[("t", 0)], ends[("t", 1)])
    assert r["mean"] == pytest.approx(((ends[("c", 1)] - 0.0) + (ends[("t", 2)] - 0.5)) / 2)
    # token latency: a program's latency over the tokens it decoded
    assert r["tok_mean"] == pytest.approx(((ends[("c", 1)]) / 12 + (ends[("t", 2)] - 0.5) / 13) / 2)


def test_workloads_are_seeded_and_poisson():
    a, b = workload("tree", 2.0, 5, 7, [10]), workload("tree", 2.0, 5, 7, [10])
    assert [(p.pid, p.arrival, p.calls) for p in a] == [(p.pid, p.arrival, p.calls) for p in b]
    assert all(x.arrival < y.arrival for x, y in zip(a, a[1:]))
    burst = workload("tree", 0.0, 5, 7, [10])
    assert [p.calls for p in burst] == [p.calls for p in a] and all(p.arrival == 0.0 for p in burst)
