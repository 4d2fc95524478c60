"""An app_queries job (teola.plan.app_job): a shipped app's queries planned from their compiled
e-graphs and run through the app on teola's runtime, every engine simulated from the shipped CPU
profile (virtual time)."""

from __future__ import annotations

import json

import pytest

from engines.requests import PrimOp
from teola.cli import main
from teola.ir.graph import Graph
from teola.ir.primitive import Primitive
from teola.plan.app_job import calls_of, record
from teola.plan.cost import Plan
from teola.plan.execute_app import fixed_plans
from teola.plan.job import parse_job
from teola.plan.search import plan_stages
from teola.plan.workload import build_workload

PROFILE = "cpu-smollm2-135m"
# prefill_split's gate off: the early prefix request staggers a replica's two calls, so the second
# finds the first's context in the prefix cache, as the plan's recording does. With the gate on the two
# prefill in one batch and share nothing: 4.13 s measured against 3.32 s planned (a gap of the plan's
# cost model, which does not see calls of one batch missing each other's prefix).
JOB = {
    "name": "rag",
    "app": "app_queries",
    "target": "naive_rag",
    "queries": 4,
    "models": {"llm": {"profile": PROFILE, "max_tokens": 96}},
    "config": {"passes": {"prefill_split": {"gate": False}}},
    "steps_profile": PROFILE,
    "simulate": PROFILE,
    "lengths": {"lengths": {"synthesis": [32]}},
}


def test_a_call_reads_the_calls_before_it_and_waits_for_the_non_llm_steps_between():
    """a's answer is embedded (2 s) and searched (1 s) before b prefills; b waits for a and 3 s."""
    g = Graph()
    a = g.add(Primitive(PrimOp.DECODING, "a", "draft", args={"max_tokens": 50}))
    emb = g.add(Primitive(PrimOp.EMBEDDING, "emb", "embed"))
    other = g.add(Primitive(PrimOp.EMBEDDING, "emb", "side"))
    search = g.add(Primitive(PrimOp.SEARCHING, "db", "search"))
    pre = g.add(Primitive(PrimOp.PREFILLING, "b", "answer", label="prefill"))
    b = g.add(Primitive(PrimOp.DECODING, "b", "answer", label="decode", args={"max_tokens": 20}))
    for u, v in ((a, emb), (emb, search), (other, search), (search, pre), (pre, b)):
        g.connect(u, v)
    trace = [
        {"primitive": "draft", "num_prompt_tokens": 30, "num_cached_tokens": 0, "num_output_tokens": 7},
        {"primitive": "embed", "started": 10.0, "finished": 12.0},
        {"primitive": "side", "started": 0.0, "finished": 0.5},
        {"primitive": "search", "started": 12.0, "finished": 13.0},
        {
            "primitive": "answer.decode",
            "num_prompt_tokens": 80,
            "num_cached_tokens": 16,
            "num_output_tokens": 9,
        },
    ]
    first, second = calls_of(g, trace)
    assert (first.engine, first.prompt, first.max_tokens, first.deps, first.delay) == ("a", 30, 50, (), 0.0)
    assert (second.engine, second.component, second.prompt, second.cached, second.max_tokens) == (
        "b",
        "answer",
        80,
        16,
        20,
    )
    assert second.deps == (0,) and second.delay == pytest.approx(3.0)


def test_naive_rags_query_is_one_synthesis_call_after_indexing_ingestion_and_search():
    (calls,) = record({**JOB, "samples": 1}, None)
    (call,) = calls
    assert (call.engine, call.component, call.max_tokens, call.deps) == ("llm", "synthesis", 96, ())
    # the longest non-LLM path: the documents' embedding, their ingestion, then the search (profile costs)
    assert 0.03 < call.delay < 0.2 and call.prompt > 100


def test_the_plan_gives_the_llm_engine_one_replica_per_query_it_can_use():
    """tp=1 only, no load cost: one query gains nothing from a second replica; four do."""
    one = build_workload(parse_job({**JOB, "queries": 1}))
    assert [s.plans for s in plan_stages(one, 2).stages] == [{"llm": Plan(1, 1)}]
    four = build_workload(parse_job(JOB))
    assert [s.plans for s in plan_stages(four, 2).stages] == [{"llm": Plan(1, 2)}]
    (r,) = one.requests["llm"]
    assert r.target == 32 and r.delay > 0 and r.stage == "synthesis"


def test_the_app_jobs_models_must_be_its_llm_engines():
    with pytest.raises(ValueError, match="must be the LLM engines its calls use"):
        build_workload(parse_job({**JOB, "models": {"other": {"profile": PROFILE}}}))
    with pytest.raises(ValueError, match="'target'"):
        parse_job({**JOB, "target": ""})
    with pytest.raises(ValueError, match="'queries'"):
        parse_job({**JOB, "queries": 0})


def test_run_job_refuses_a_plan_that_changes_an_app_engines_plan_or_overcommits_devices():
    with pytest.raises(ValueError, match="changes 'llm'"):
        fixed_plans([{"llm": Plan(1, 1)}, {"llm": Plan(1, 2)}], 2)
    with pytest.raises(ValueError, match="need 3 devices together"):
        fixed_plans([{"llm": Plan(1, 2)}, {"judge": Plan(1, 1)}], 2)
    assert fixed_plans([{"llm": Plan(1, 2)}], 2) == {"llm": Plan(1, 2)}


def test_plan_and_run_job_plan_and_run_a_shipped_apps_queries_through_the_runtime(tmp_path, capsys):
    job, plan, trace = tmp_path / "job.json", tmp_path / "plan.json", tmp_path / "calls.jsonl"
    job.write_text(json.dumps(JOB))
    assert main(["plan", str(job), "--gpus", "2", "--out", str(plan)]) == 0
    assert "llm tp1xdp2" in capsys.readouterr().out
    assert main(["run-job", str(job), "--plan", str(plan), "--trace", str(trace)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["simulated_engines"] and out["queries"] == 4 and out["calls"] == 4
    assert out["stages"][0]["plans"] == {"llm": "tp1xdp2"}
    assert out["tokens"]["llm"]["predicted"] == 32
    # two queries per replica as planned: the runtime's measured time is the plan's within 10%
    assert abs(out["measured_s"] - out["predicted_s"]) < 0.1 * out["measured_s"]
    assert out["end_to_end_s"] == pytest.approx(out["search_s"] + out["measured_s"], abs=0.01)
    assert len(trace.read_text().splitlines()) == 4


PROGRAM = """
from teola.api.program import Program


async def draft_and_refine(target, i):
    async with Program(target, f"refine-{i}") as prog:
        draft = await prog.call(f"Draft a short answer to question {i}: why is the sky blue?", max_tokens=48)
        return await prog.call(f"Improve this answer: {draft}", parent_ids=[draft.call_id], max_tokens=32)
"""
PROGRAM_JOB = {
    "name": "refine",
    "app": "program_runs",
    "target": "naive_rag",
    "program": "plan_demo_program:draft_and_refine",
    "runs": 6,
    "models": {"llm": {"profile": PROFILE, "max_tokens": 64}},
    "steps_profile": PROFILE,
    "simulate": PROFILE,
    "lengths": {"lengths": {"call": [32]}},
}


def test_a_program_call_reads_the_calls_finished_before_it_was_submitted():
    from teola.plan.program_job import LoggedCall, calls_of_run

    result = {"num_prompt_tokens": 40, "num_cached_tokens": 0, "num_output_tokens": 5}
    a, c, b = calls_of_run(
        [
            LoggedCall(0, "llm", 10.0, 12.0, 48, result),
            LoggedCall(0, "llm", 12.5, 14.0, 32, result),
            LoggedCall(0, "llm", 11.0, 13.0, 16, result),
        ],
        start=10.0,
    )
    assert (a.deps, a.delay, a.max_tokens) == ((), 0.0, 48)
    assert (c.deps, c.delay, c.max_tokens) == ((), 1.0, 16)  # submitted while a ran
    assert (b.deps, b.max_tokens) == ((0,), 32) and b.delay == pytest.approx(0.5)  # after a, not c


def test_plan_and_run_job_plan_and_run_a_programs_runs_from_a_sampled_trace(tmp_path, monkeypatch, capsys):
    (tmp_path / "plan_demo_program.py").write_text(PROGRAM)
    monkeypatch.syspath_prepend(str(tmp_path))
    wl = build_workload(parse_job(PROGRAM_JOB))
    reqs = wl.requests["llm"]
    assert (
        len(reqs) == 12
        and [r.after for r in reqs[:2]] == [None, 0]
        and [r.max_tokens for r in reqs[:2]] == [48, 32]
    )
    job, plan = tmp_path / "job.json", tmp_path / "plan.json"
    job.write_text(json.dumps(PROGRAM_JOB))
    assert main(["plan", str(job), "--gpus", "2", "--out", str(plan)]) == 0
    assert "llm tp1xdp2" in capsys.readouterr().out
    assert main(["run-job", str(job), "--plan", str(plan)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queries"] == 6 and out["calls"] == 12
    assert abs(out["measured_s"] - out["predicted_s"]) < 0.15 * out["measured_s"]


def test_an_app_job_is_not_a_part_of_a_mix():
    other = {
        "app": "routing",
        "dataset": "truthfulqa",
        "requests": 2,
        "models": {"r": {}},
        "routes": {"r": 1},
    }
    with pytest.raises(ValueError, match="run alone"):
        parse_job({"app": "mix", "parts": [JOB, other]})
