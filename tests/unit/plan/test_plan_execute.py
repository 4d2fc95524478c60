"""`teola run-job`'s executor (teola.plan.execute) driving simulated engines on the virtual clock:
every request is answered once, downstream prompts carry the upstream outputs, a model that changes
plan between stages is restarted and its unfinished requests are sent again, and devices are never
over-committed."""

from __future__ import annotations

import pytest

from engines.sim.llm import SimLLM
from teola.plan.cost import Plan
from teola.plan.execute import Executor
from teola.plan.job import parse_job
from teola.plan.workload import build_workload
from teola.sim.virtual_loop import run_virtual

JOB = {
    "app": "ensembling",
    "dataset": "truthfulqa",
    "requests": 12,
    "models": {"a": {"max_tokens": 16}, "b": {"max_tokens": 24}, "f": {"max_tokens": 8}},
    "answerers": ["a", "b"],
    "fuser": "f",
}


def _executor(devices: int):
    job = parse_job(JOB)
    wl = build_workload(job, "cpu-smollm2-135m")
    engines: list[SimLLM] = []
    prompts: list[str] = []

    def make(name, core, spec):
        e = SimLLM(name, {"base": 0.01, "decode_seq": 0.001}, max_num_seqs=4, max_tokens=spec.max_tokens)
        real = e.execute

        async def execute(op, reqs):
            prompts.extend(r["parts"][0][1] for r in reqs)
            return await real(op, reqs)

        e.execute = execute
        engines.append(e)
        return e

    return Executor(job, wl, list(range(devices)), lambda _: None, make), engines, prompts


def test_every_request_is_answered_once_and_the_fuser_reads_the_answers():
    ex, engines, prompts = _executor(2)
    stages = [{"a": Plan(1, 1), "b": Plan(1, 1)}, {"b": Plan(1, 2)}, {"f": Plan(1, 2)}]
    took = run_virtual(ex.run(stages))
    assert took >= 0 and all(ex.finished(m) for m in "abf")
    assert sorted((t["model"], t["key"]) for t in ex.trace) == sorted(
        (m, k) for m in "abf" for k in range(12)
    )
    fuse = [p for p in prompts if p.startswith("Several assistants")]
    assert len(fuse) == 12 and all(ex.outputs["a"][0].split()[0] in p for p in fuse[:1])
    assert len(engines) == 2 + 2 + 2  # b restarted with 2 instances; the fuser on 2
    assert [s["plans"] for s in ex.stage_log][0] == {"a": "tp1xdp1", "b": "tp1xdp1"}


def test_output_tokens_sum_up_measured_and_predicted_lengths_per_model():
    from teola.plan.run_job import output_tokens

    trace = [
        {"model": "a", "num_output_tokens": 10, "predicted_tokens": 20},
        {"model": "b", "num_output_tokens": 5, "predicted_tokens": 5},
        {"model": "a", "num_output_tokens": 14, "predicted_tokens": 30},
    ]
    assert output_tokens(trace) == {
        "a": {"calls": 2, "measured": 12.0, "predicted": 25.0},
        "b": {"calls": 1, "measured": 5.0, "predicted": 5.0},
    }


def test_a_stage_needing_more_devices_than_free_is_refused():
    ex, _, _ = _executor(1)
    with pytest.raises(ValueError, match="needs 2 devices, 1 are available"):
        run_virtual(ex.run([{"a": Plan(1, 1), "b": Plan(1, 1)}]))


def test_an_upstream_model_still_running_keeps_its_device_and_the_next_stage_waits_for_its_devices():
    """The plan expected b to be done before the fuser takes both devices; b is still running in its
    last planned stage, so it keeps running (the paper's dynamic scheduler) and the fuser's pair,
    which does not fit beside it, waits for b's finish; every request is still answered."""
    ex, _, _ = _executor(2)
    run_virtual(ex.run([{"a": Plan(1, 1), "b": Plan(1, 1)}, {"f": Plan(1, 2)}]))
    assert all(ex.finished(m) for m in "abf")
    assert ex.stage_log[0]["finished"] == ["a"]
    assert [s["plans"] for s in ex.stage_log[1:]] == [{"b": "tp1xdp1"}, {"f": "tp1xdp2"}]


def test_run_time_replanning_fires_when_the_engines_outputs_are_longer_than_sampled():
    job = parse_job(
        {
            **JOB,
            "lengths": {"lengths": {"answer": [2], "fuse": [2]}},
            "models": {m: {"max_tokens": 40} for m in "abf"},
        }
    )
    wl = build_workload(job, "cpu-smollm2-135m")
    from teola.plan.replan import Replanner
    from teola.plan.search import plan_stages

    def make(name, core, spec):  # the real outputs run to 30 tokens, the plan sampled 2
        return SimLLM(name, {"base": 0.01, "decode_seq": 0.001}, max_num_seqs=4, lengths={"text": [30]})

    ex = Executor(job, wl, [0, 1], lambda _: None, make)
    stages = [dict(s.plans) for s in plan_stages(wl, 2, "greedy").stages]
    rp = Replanner(wl, 2, min_samples=3)
    run_virtual(ex.run(stages, rp))
    assert all(ex.finished(m) for m in "abf")
    assert ex.replans and ex.replans[0]["diverged"][0][2:] == (2.0, 30.0)


def test_without_an_engine_factory_instances_come_from_the_registry_and_calls_go_through_the_runtime(
    monkeypatch,
):
    """The default path of run-job: each instance is built by the engine registry from the model's
    "engine" options (here the registry's simulated vLLM, `simulate=<profile>`) and started by its
    own teola Runtime, and every request is a program call on that runtime."""
    from teola.runtime import Runtime

    calls = []
    real = Runtime.submit_call

    async def submit_call(self, engine, request, **kw):
        calls.append((engine, kw["call_id"]))
        return await real(self, engine, request, **kw)

    monkeypatch.setattr(Runtime, "submit_call", submit_call)
    sim = {"simulate": "cpu-smollm2-135m", "max_num_seqs": 4}
    job = parse_job(
        {
            **JOB,
            "models": {
                "a": {"max_tokens": 16, "engine": sim},
                "b": {"max_tokens": 24, "engine": sim},
                "f": {"max_tokens": 8, "engine": sim},
            },
        }
    )
    wl = build_workload(job, "cpu-smollm2-135m")
    ex = Executor(job, wl, [0, 1], lambda _: None)
    run_virtual(ex.run([{"a": Plan(1, 1), "b": Plan(1, 1)}, {"b": Plan(1, 2)}, {"f": Plan(1, 2)}]))
    assert all(ex.finished(m) for m in "abf")
    # b's unfinished calls are sent again when it restarts on two instances
    assert set(calls) == {(m, f"{m}:{k}") for m in "abf" for k in range(12)}
