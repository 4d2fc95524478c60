"""`teola plan`: prints the stages and the baselines, writes a plan file, and rejects bad input with
exit code 2 and a message naming the problem."""

from __future__ import annotations

import json

from teola.cli import main

JOB = {
    "name": "tiny",
    "app": "ensembling",
    "dataset": "truthfulqa",
    "requests": 40,
    "models": {
        "a": {"max_tokens": 64},
        "b": {"profile": "a100-llama2-13b", "max_tokens": 64},
        "f": {"max_tokens": 32},
    },
    "answerers": ["a", "b"],
    "fuser": "f",
    "lengths": {"lengths": {"answer": [5, 30, 60], "fuse": [20]}},
}


def test_plan_prints_stages_next_to_the_baselines_and_writes_a_plan_file(tmp_path, capsys):
    job = tmp_path / "job.json"
    job.write_text(json.dumps(JOB))
    out = tmp_path / "plan.json"
    assert main(["plan", str(job), "--gpus", "4", "--profile", "a100-llama2-7b", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert (
        "SIMULATED" in text
        and "SamuLLM greedy" in text
        and "max heuristic" in text
        and "min heuristic" in text
    )
    plan = json.loads(out.read_text())
    assert plan["gpus"] == 4 and set(plan["baselines"]) == {"max", "min"}
    assert (
        plan["predicted_s"] == sum(s["duration_s"] for s in plan["stages"])
        or abs(plan["predicted_s"] - sum(s["duration_s"] for s in plan["stages"])) < 0.01
    )
    for stage in plan["stages"]:
        assert sum(p["tp"] * p["dp"] for p in stage["plans"].values()) <= 4
    finished = [m for s in plan["stages"] for m in s["finished"]]
    assert sorted(finished) == ["a", "b", "f"] and finished[-1] == "f"  # the fuser reads the answers
    assert main(["plan", str(job), "--gpus", "4", "--profile", "a100-llama2-7b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == {"a": 40, "b": 40, "f": 40}


def test_plan_rejects_bad_input_with_exit_code_2(tmp_path, capsys):
    job = tmp_path / "job.json"
    job.write_text(json.dumps(JOB))
    assert main(["plan", str(job), "--gpus", "4"]) == 2
    assert "no 'profile'" in capsys.readouterr().err
    assert main(["plan", str(tmp_path / "none.json"), "--profile", "a100-llama2-7b"]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["plan", str(job), "--gpus", "0", "--profile", "a100-llama2-7b"]) == 2
    assert "--gpus" in capsys.readouterr().err
