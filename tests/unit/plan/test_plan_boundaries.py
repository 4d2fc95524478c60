"""Stage boundaries, planned and executed alike: the planner's replica simulation serves a stage's
shared prompt prefix from the prefix cache, a stage's new models load only once the models it stops
have shut down (and a model still loading first finishes loading), and run-job's executor ends a
stage when its first model finishes even while an instance the stage started is still loading.
Hand-computed cases on a virtual clock, no timing thresholds."""

from __future__ import annotations

import asyncio

import pytest

from engines.sim.cost import IterationCost
from engines.sim.llm import SimLLM
from teola.plan.cost import ModelCost, Plan
from teola.plan.execute import Executor
from teola.plan.job import parse_job
from teola.plan.stage_eval import StageEval, State
from teola.plan.workload import Request, Workload, build_workload
from teola.sim.replica import SimRequest, simulate_replica
from teola.sim.virtual_loop import run_virtual


def test_a_request_admitted_after_the_first_iteration_prefills_only_its_uncached_tokens():
    """1 s per prefilled token, nothing else: one sequence at a time, the first request prefills all
    10 tokens (10 s), the second only the 2 past its 8 cached ones (finished at 12 s); admitted
    together at the start, both prefill in full (20 s); at least one token is always prefilled."""
    cost = IterationCost(base=0.0, prefill_token=1.0)
    one_at_a_time = simulate_replica(
        [SimRequest(0, 10, 1, cached=8), SimRequest(1, 10, 1, cached=8)], cost, 1, 1000, 10**6
    )
    assert one_at_a_time.finish == {0: 10.0, 1: 12.0}
    together = simulate_replica(
        [SimRequest(0, 10, 1, cached=8), SimRequest(1, 10, 1, cached=8)], cost, 2, 1000, 10**6
    )
    assert together.finish == {0: 20.0, 1: 20.0}
    whole = simulate_replica(
        [SimRequest(0, 10, 1, cached=10), SimRequest(1, 10, 1, cached=10)], cost, 1, 1000, 10**6
    )
    assert whole.finish[1] == 11.0


def test_cached_tokens_are_the_whole_blocks_of_the_shared_prefix():
    def cost(**entry):
        return ModelCost(
            {"name": "c", "provenance": "derived", "engines": {"vllm": {"cost": {"base": 1.0}, **entry}}}
        )

    assert cost(block_size=32).cached_tokens(35) == 32
    assert cost(block_size=32).cached_tokens(31) == 0
    assert cost(block_size=16, prefix_caching=False).cached_tokens(35) == 0


def _cost(load: float, stop: float) -> ModelCost:
    return ModelCost(
        {
            "name": "hand",
            "provenance": "derived",
            "engines": {
                "vllm": {
                    "cost": {"base": 1.0},
                    "max_num_seqs": 8,
                    "max_model_len": 1000,
                    "parallel": {
                        "params_b": 1.0,
                        "tp_degrees": [1],
                        "load": {"seconds": {"1": load}, "stop_s": stop},
                    },
                }
            },
        }
    )


def _eval(loaded: dict[str, Plan], load_left: dict[str, float] | None = None, b_tokens: int = 5) -> StageEval:
    """Models a and b (load 10 s, stop 3 s), one request each of 5 output tokens (5 iterations of 1 s)."""
    reqs = {m: [Request(0, "s", {}, 1, 5 if m == "a" else b_tokens, 100)] for m in "ab"}
    wl = Workload({m: _cost(10.0, 3.0) for m in "ab"}, reqs, {"a": set(), "b": set()})
    return StageEval(wl, State({"a": set(), "b": set()}, loaded=loaded, load_left=load_left or {}), 2)


def test_a_new_model_loads_after_the_models_the_stage_stops_have_shut_down():
    ev = _eval({"a": Plan(1, 1)})
    assert ev.run("b", Plan(1, 1), {"b": Plan(1, 1)}).load == 13.0  # a stops (3 s), then b loads (10 s)
    assert ev.duration({"b": Plan(1, 1)}) == 18.0  # + 5 iterations
    both = {"a": Plan(1, 1), "b": Plan(1, 1)}
    assert ev.run("a", Plan(1, 1), both).load == 0.0 and ev.run("b", Plan(1, 1), both).load == 10.0
    assert ev.run("a", Plan(1, 2), {"a": Plan(1, 2)}).load == 13.0  # a new plan restarts a


def test_a_model_stopped_while_loading_finishes_loading_first():
    ev = _eval({"a": Plan(1, 1)}, {"a": 4.0})
    assert ev.run("b", Plan(1, 1), {"b": Plan(1, 1)}).load == 4.0 + 3.0 + 10.0
    assert ev.run("a", Plan(1, 1), {"a": Plan(1, 1)}).load == 4.0  # kept: the rest of its loading


def test_a_stop_outlasting_a_short_stage_delays_the_next_stages_loads():
    """a stops (3 s) while b, kept, finishes its 2-token request in 2 s: 1 s of a's stop is left,
    and the next stage's new model waits for it (b kept there: no stop of its own)."""
    ev = _eval({"a": Plan(1, 1), "b": Plan(1, 1)}, b_tokens=2)
    state, d = ev.apply({"b": Plan(1, 1)})
    assert d == 2.0 and state.stop_left == {"a": 1.0}
    nxt = StageEval(ev.wl, state, 2)
    assert nxt.run("a", Plan(1, 1), {"a": Plan(1, 1), "b": Plan(1, 1)}).load == 1.0 + 10.0


JOB = {
    "app": "ensembling",
    "dataset": "truthfulqa",
    "requests": 12,
    "models": {"a": {"max_tokens": 16}, "b": {"max_tokens": 24}, "f": {"max_tokens": 8}},
    "answerers": ["a", "b"],
    "fuser": "f",
}
LOAD, STOP = 10.0, 3.0


class _SlowStart(SimLLM):
    async def start(self) -> None:
        await asyncio.sleep(LOAD)
        await super().start()

    async def stop(self) -> None:
        await asyncio.sleep(STOP)
        await super().stop()


def test_the_executor_ends_a_stage_at_its_first_finish_while_a_new_instance_still_loads():
    """Instances load in 10 s and stop in 3 s; a answers in well under a second, b in a few seconds.
    Stage 1 (a, b) ends when a is done; stage 2 stops a, then starts the fuser, and ends when b is
    done, while the fuser still loads; the fuser keeps its plan in stage 3, so it is not restarted.
    The job completes at the fuser's last answer; stopping it afterwards is teardown."""
    job = parse_job(JOB)
    wl = build_workload(job, "cpu-smollm2-135m")
    engines = []

    def make(name, core, spec):
        e = _SlowStart(
            name,
            {"base": 0.06 if name.startswith("b") else 0.01, "decode_seq": 0.001},
            max_num_seqs=4,
            max_tokens=spec.max_tokens,
        )
        engines.append(e)
        return e

    ex = Executor(job, wl, [0, 1], lambda _: None, make)
    took = run_virtual(
        ex.run([{"a": Plan(1, 1), "b": Plan(1, 1)}, {"b": Plan(1, 1), "f": Plan(1, 1)}, {"f": Plan(1, 1)}])
    )
    assert [s["finished"] for s in ex.stage_log] == [["a"], ["b"], ["f"]]
    ev = {(e["model"], e["event"]): e for e in ex.events}
    assert ev[("a", "stop")]["end_s"] - ev[("a", "stop")]["start_s"] == pytest.approx(STOP, abs=0.01)
    assert ev[("f", "load")]["start_s"] == pytest.approx(ev[("a", "stop")]["end_s"], abs=0.01)
    assert ev[("f", "load")]["end_s"] - ev[("f", "load")]["start_s"] == pytest.approx(LOAD, abs=0.01)
    assert ex.stage_log[1]["end_s"] < ev[("f", "load")]["end_s"]
    assert len(engines) == 3
    assert took == pytest.approx(ex.done_at["f"]) and ex.teardown_s == pytest.approx(STOP)
