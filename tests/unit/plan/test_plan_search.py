"""The planner's search (teola.plan.search): SamuLLM's greedy stage search finds the optimum of
hand-solvable cases where the heuristics do not, respects dependencies, and re-planning triggers
when observed lengths diverge from the sampled ones."""

from __future__ import annotations

import pytest

from teola.plan.cost import ModelCost, Plan
from teola.plan.replan import Replanner
from teola.plan.search import plan_stages
from teola.plan.stage_eval import State
from teola.plan.workload import Request, Workload


def _cost(base: float = 1.0, decode_seq: float = 0.0, load: float = 0.0, tp=(1,)) -> ModelCost:
    """Iterations cost `base` (+ decode_seq per sequence) on one device; tensor parallelism without
    communication cost and weights 1 GB."""
    return ModelCost(
        {
            "name": "hand",
            "provenance": "derived",
            "engines": {
                "vllm": {
                    "cost": {"base": base, "decode_seq": decode_seq},
                    "max_num_seqs": 256,
                    "max_model_len": 1000,
                    "parallel": {
                        "params_b": 1.0,
                        "layers": 1,
                        "hidden": 1,
                        "weights_gb": 1.0,
                        "kv_bytes_per_token": 1000,
                        "gpu_memory_gb": 10,
                        "tp_degrees": list(tp),
                        "nvlink_group": 8,
                        "nvlink_gbps": 1e9,
                        "pcie_gbps": 1e9,
                        "allreduce_latency_s": 0.0,
                        "step_overhead_s": 0.0,
                        "load": {"seconds": {str(t): load for t in tp}},
                    },
                }
            },
        }
    )


def _reqs(n: int, target: int, deps_of: str | None = None) -> list[Request]:
    return [
        Request(k, "s", {}, 1, target, 1000, ((deps_of, k),) if deps_of else (), group=k) for k in range(n)
    ]


def test_two_independent_models_share_the_gpus_instead_of_taking_turns():
    """Each model's time is its longest output (100 iterations of 1 s) whatever its GPUs: the optimum
    runs both at once on one GPU each (100 s); giving one model both GPUs (max heuristic) takes 200 s."""
    wl = Workload(
        {"a": _cost(), "b": _cost()}, {"a": _reqs(10, 100), "b": _reqs(10, 100)}, {"a": set(), "b": set()}
    )
    best = plan_stages(wl, 2, "greedy")
    assert best.completion_s == pytest.approx(100.0)
    assert len(best.stages) == 1 and best.stages[0].plans == {"a": Plan(1, 1), "b": Plan(1, 1)}
    assert plan_stages(wl, 2, "max").completion_s == pytest.approx(200.0)


def test_greedy_gives_the_gpus_to_the_model_that_scales():
    """a: 40 requests whose iterations cost 1 s per running sequence (data parallelism divides its
    360 GPU-seconds); b: 100 iterations of 1 s whatever its GPUs. On 4 GPUs the greedy search runs b
    on one GPU and a on three (a's largest replica: 14 requests, 9 decode iterations of 14 s); b ends
    the stage at 101 s (a prefill iteration and 100 decode ones), a keeps its plan and has 2 tokens
    left (the iteration in progress at a stage boundary is not counted): 101 + 28 = 129 s. One model at
    a time: a on 4 GPUs (10 x 9 = 90 s), then b (101 s). Even split, 2 + 2 GPUs: at 101 s b is done and
    a, re-planned to 4 GPUs, restarts: 191 s."""
    wl = Workload(
        {"a": _cost(base=0.0, decode_seq=1.0), "b": _cost(base=1.0)},
        {"a": _reqs(40, 10), "b": _reqs(3, 101)},
        {"a": set(), "b": set()},
    )
    best = plan_stages(wl, 4, "greedy")
    assert best.stages[0].plans == {"a": Plan(1, 3), "b": Plan(1, 1)}
    assert best.completion_s == pytest.approx(129.0)
    assert plan_stages(wl, 4, "max").completion_s == pytest.approx(191.0)
    assert plan_stages(wl, 4, "min").completion_s == pytest.approx(191.0)


def test_a_downstream_model_runs_only_when_its_inputs_can_be_produced():
    wl = Workload(
        {"a": _cost(), "b": _cost()},
        {"a": _reqs(4, 10), "b": _reqs(4, 5, deps_of="a")},
        {"a": set(), "b": {"a"}},
    )
    for method in ("greedy", "max", "min"):
        sched = plan_stages(wl, 2, method)
        assert "b" not in sched.stages[0].plans or "a" in sched.stages[0].plans
        assert sched.completion_s >= 10.0 + 5.0 - 1e-9  # b's requests start after a's outputs
    with pytest.raises(ValueError, match="unknown planning method"):
        plan_stages(wl, 2, "random")


def test_replanning_triggers_when_observed_lengths_diverge_and_replans_the_rest():
    wl = Workload(
        {"a": _cost(), "b": _cost()}, {"a": _reqs(40, 10), "b": _reqs(40, 10)}, {"a": set(), "b": set()}
    )
    before = plan_stages(wl, 2, "greedy").completion_s
    rp = Replanner(wl, 2, tolerance=0.25, min_samples=5)
    for _ in range(4):
        rp.observe("a", "s", 40)
    assert not rp.should_replan()  # too few observations yet
    rp.observe("a", "s", 40)
    assert rp.diverged() == [("a", "s", 10.0, 40.0)] and rp.should_replan()
    quiet = Replanner(wl, 2, min_samples=5)
    for _ in range(10):
        quiet.observe("b", "s", 11)
    assert not quiet.should_replan()
    assert quiet.should_replan(finished=["b"], expected_first="a")
    state = State({"a": set(range(5)), "b": set()})
    after = rp.replan(state)
    assert all(r.target == 40 for r in wl.requests["a"][5:]) and after.completion_s > before


def test_the_even_split_never_runs_a_model_without_the_models_it_reads_from():
    """Two GPUs, two answerers and a fuser reading both: the fuser (most work left) cannot take a GPU
    before both answerers are done or running beside it, or the stage could never end."""
    deps = [Request(k, "s", {}, 1, 50, 1000, (("a", k), ("b", k)), group=k) for k in range(4)]
    wl = Workload(
        {"a": _cost(), "b": _cost(), "f": _cost()},
        {"a": _reqs(4, 10), "b": _reqs(4, 20), "f": deps},
        {"a": set(), "b": set(), "f": {"a", "b"}},
    )
    for method in ("min", "greedy", "max"):
        sched = plan_stages(wl, 2, method, max_stages=10)
        assert sched.stages[-1].finished == ["f"] and sched.completion_s >= 20 + 50 - 1e-9


def _idle_gpu_job() -> Workload:
    """a: 10 requests of 10 tokens, no loading (10 s on any plan); b: 10 requests of 100 tokens,
    loading 50 s (150 s on any plan: its iterations cost 1 s whatever its batch)."""
    return Workload(
        {"a": _cost(), "b": _cost(load=50.0)},
        {"a": _reqs(10, 10), "b": _reqs(10, 100)},
        {"a": set(), "b": set()},
    )


def test_the_default_greedy_is_the_papers_single_pass_and_may_leave_a_gpu_idle():
    """Stage 1 on 2 GPUs: a on one GPU does 110 token-units in 10 s (11 per GPU-second), the best
    gain; adding b gains nothing (it is still loading when a ends the stage at 10 s) and a second
    replica of a gains nothing (its time is its iterations), so the paper's pass stops and one GPU
    stays idle. Stage 2: b alone, loading 50 s then 100 iterations: 10 + 150 = 160 s. best-of-3
    also tries loading b on the idle GPU during stage 1 (40 s of loading left at 10 s): 10 + 140 =
    150 s, and keeps that plan, paying the three searches' time."""
    wl = _idle_gpu_job()
    paper = plan_stages(wl, 2)
    assert paper.method == "greedy"
    assert [st.plans for st in paper.stages] == [{"a": Plan(1, 1)}, {"b": Plan(1, 1)}]
    assert paper.completion_s == pytest.approx(160.0)
    best = plan_stages(wl, 2, "best-of-3")
    assert best.method == "best-of-3"
    assert best.stages[0].plans == {"a": Plan(1, 1), "b": Plan(1, 1)}
    assert best.completion_s == pytest.approx(150.0)
    assert "160.0 s from empty (the paper's pass)" in best.notes[0]


def test_every_reported_time_adds_the_search_time_to_the_inference_time():
    """The paper's metric: end to end = extra (search) time + inference time. Hand-set search
    times: greedy 160 s + 30 s = 190 s; best-of-3 150 s + 50 s = 200 s, 1.05x of greedy's."""
    from teola.plan.report import plan_file, schedule_dict, table

    wl = _idle_gpu_job()
    greedy = plan_stages(wl, 2)
    best = plan_stages(wl, 2, "best-of-3")
    greedy.search_s, best.search_s = 30.0, 50.0
    assert greedy.end_to_end_s == pytest.approx(190.0) and best.end_to_end_s == pytest.approx(200.0)
    assert schedule_dict(best)["end_to_end_s"] == 200.0
    plan = plan_file("j", wl, {"greedy": greedy, "best-of-3": best})
    assert plan["method"] == "greedy" and plan["end_to_end_s"] == 190.0 and plan["predicted_s"] == 160.0
    assert plan["baselines"]["best-of-3"]["end_to_end_s"] == 200.0
    text = table("j", wl, {"greedy": greedy, "best-of-3": best})
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert "190.0" in rows["SamuLLM"] and "1.00x" in rows["SamuLLM"]
    assert "200.0" in rows["greedy"] and "1.05x" in rows["greedy"]
