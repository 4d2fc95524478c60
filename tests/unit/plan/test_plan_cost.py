"""The planner's cost model (teola.plan.cost, teola.sim.replica): tensor-parallel scaling as
documented, loading costs fitted from synthetic measurements with known coefficients, and the fast
replica simulation agreeing with the simulated engine (engines.sim.llm) it stands in for."""

from __future__ import annotations

import asyncio

import pytest

from engines.sim.cost import IterationCost
from engines.sim.llm import SimLLM
from teola.plan.cost import ModelCost, Plan, fit_load
from teola.sim.replica import SimRequest, simulate_replica
from teola.sim.virtual_loop import run_virtual


def _profile(**parallel) -> dict:
    par = {
        "params_b": 7.0,
        "layers": 10,
        "hidden": 1000,
        "weights_gb": 10.0,
        "kv_bytes_per_token": 1_000_000,
        "gpu_memory_gb": 20,
        "memory_utilization": 1.0,
        "tp_degrees": [1, 2, 4],
        "nvlink_group": 2,
        "nvlink_gbps": 100,
        "pcie_gbps": 10,
        "allreduce_latency_s": 1e-5,
        "step_overhead_s": 0.002,
        "load": {"startup_s": 5, "read_gbps": 2.0, "tp_init_s": 3},
        **parallel,
    }
    return {
        "name": "t",
        "provenance": "derived",
        "engines": {
            "vllm": {
                "cost": {"base": 0.012, "prefill_token": 1e-4, "decode_seq": 2e-4, "context_token": 1e-6},
                "max_model_len": 4096,
                "parallel": par,
            }
        },
    }


def test_tensor_parallel_cost_follows_the_documented_formula():
    c = ModelCost(_profile())
    two, four = c.iteration(2), c.iteration(4)
    comm2 = 2 * 10 * 1000 * 2 * 2 * (1 / 2) / 100e9  # per token inside the NVLink pair
    comm4 = 2 * 10 * 1000 * 2 * 2 * (3 / 4) / 10e9  # across pairs: PCIe
    assert two.base == pytest.approx(0.010 / 2 + 0.002 + 2 * 10 * 1e-5)
    assert two.decode_seq == pytest.approx(2e-4 / 2 + comm2) and four.prefill_token == pytest.approx(
        1e-4 / 4 + comm4
    )
    assert two.context_token == pytest.approx(5e-7)
    assert c.kv_tokens(1) == 10_000 and c.kv_tokens(2) == 30_000
    assert c.degrees() == [1, 2, 4] and ModelCost(_profile(weights_gb=18.0)).degrees() == [
        2,
        4,
    ]  # 2 GB KV: too small
    assert c.load_seconds(1) == pytest.approx(5 + 10 / 2) and c.load_seconds(4) == pytest.approx(
        5 + 10 / 8 + 3
    )
    assert Plan(2, 3).gpus == 6 and len(c.plans(4)) == 4 + 2 + 1


def test_load_costs_are_recovered_from_loads_measured_under_known_coefficients():
    true = {"startup_s": 8.0, "read_gbps": 2.5, "tp_init_s": 4.0}
    samples = [
        (t, w, true["startup_s"] + w / (t * true["read_gbps"]) + (true["tp_init_s"] if t > 1 else 0))
        for t in (1, 2, 4, 8)
        for w in (13.5, 26.0)
    ]
    assert fit_load(samples) == pytest.approx(true, rel=1e-6)
    with pytest.raises(ValueError, match="at least 3"):
        fit_load(samples[:2])


def _sim_llm_seconds(
    prompts: list[int], outs: list[int], cost: IterationCost, seqs: int, budget: int
) -> float:
    async def main() -> float:
        engine = SimLLM(
            "x", cost, max_num_seqs=seqs, max_num_batched_tokens=budget, token_ratio=1.0, template_tokens=0
        )
        await engine.start()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        # distinct words: no prefix-cache hits, as the fast simulation assumes
        reqs = [
            {
                "parts": [["q", " ".join(f"w{i}x{j}" for j in range(p - 3))]],
                "max_tokens": o,
                "ignore_eos": True,
            }
            for i, (p, o) in enumerate(zip(prompts, outs))
        ]
        await engine.execute("decoding", reqs)
        took = loop.time() - t0
        await engine.stop()
        return took

    return run_virtual(main())


@pytest.mark.parametrize("seqs,budget", [(4, 256), (16, 2048)])
def test_the_fast_replica_simulation_agrees_with_the_simulated_engine(seqs, budget):
    cost = IterationCost(
        base=0.01, prefill_token=1e-4, decode_seq=2e-3, context_token=1e-6, prefill_attention=1e-4
    )
    prompts = [40 + 37 * (i % 7) for i in range(24)]
    outs = [5 + 13 * (i % 5) for i in range(24)]
    slow = _sim_llm_seconds(prompts, outs, cost, seqs, budget)
    fast = simulate_replica(
        [SimRequest(i, p, o) for i, (p, o) in enumerate(zip(prompts, outs))], cost, seqs, budget, 10**9
    )
    assert fast.end == pytest.approx(slow, rel=0.03)
    assert len(fast.finish) == 24


def test_chained_and_late_requests_wait_and_a_horizon_reports_progress():
    cost = IterationCost(base=1.0)
    reqs = [SimRequest(0, 10, 3), SimRequest(1, 10, 3, after=0), SimRequest(2, 10, 2, ready=100.0)]
    res = simulate_replica(reqs, cost, 8, 1000, 10**6)
    assert res.finish[0] == 3.0 and res.finish[1] == 6.0 and res.finish[2] == 102.0
    cut = simulate_replica([SimRequest(0, 10, 10)], cost, 8, 1000, 10**6, horizon=4.0)
    assert cut.end == 4.0 and cut.progress == {0: 4} and not cut.finish
    resumed = simulate_replica([SimRequest(0, 10, 10, done=4)], cost, 8, 1000, 10**6)
    assert resumed.end == 6.0
