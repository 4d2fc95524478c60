"""bench.studies.sim.sim_autellix at its smallest configuration (--quick: 6 ShareGPT programs, 2 loads, the
four systems) end to end in virtual time, and its reading of throughput at equal latency."""

from __future__ import annotations

import argparse
import json

import bench.studies.sim.sim_autellix as sa
import bench.studies.sim.sim_autellix_report as report


def test_quick_run_gives_every_system_the_same_programs_and_a_small_simulated_page(monkeypatch):
    written = {}
    monkeypatch.setattr(
        sa,
        "write_results",
        lambda name, data, md, subject: written.update(name=name, data=data, md=md, subject=subject),
    )
    p = argparse.ArgumentParser()
    sa.add_arguments(p)
    assert sa.run_cli(p.parse_args(["--quick", "--jobs", "1"]), ["--quick"], p) == 0
    data = written["data"]
    rows = data["workloads"]["sharegpt"]["rows"]
    assert len(rows) == 2 * len(sa.SYSTEMS)
    for load in (0.6, 1.2):
        at = {r["system"]: r for r in rows if r["load"] == load}
        assert len({r["output_tokens"] for r in at.values()}) == 1  # the same programs, exact lengths
        assert at["vllm"]["cached_tokens"] == 0 < at["vllm-opt"]["cached_tokens"]
        assert all(r["mechanism"]["running_max"] >= 1 for r in at.values())
    assert written["name"] == "quick/sim_autellix" and written["subject"] == "sim"
    assert "SIMULATED" in written["md"] and "| sharegpt (PLAS) | vLLM-opt" in written["md"]
    assert len(json.dumps(data, default=str)) < 200_000


def test_ratios_read_autellix_over_each_baseline_at_the_target():
    curves = {"vllm-opt": (10, 20, 40), "mlfq": (10, 30, 60), "autellix": (10, 11, 12), "vllm": (20, 60, 90)}
    rows = [
        {"system": s, "policy": s, "load": x, "rate": float(x), "tok_mean": t / 1000}
        for s, ts in curves.items()
        for x, t in zip((1, 2, 3), ts)
    ]
    r = report.ratios(rows, 1.5)  # target 15 ms: vLLM-opt reaches it at rate 1.5, MLFQ at 1.25
    assert abs(r["target"] - 0.015) < 1e-12
    assert abs(r["autellix_vs"]["vllm-opt"]["ratio"] - 3 / 1.5) < 1e-9
    assert r["autellix_vs"]["vllm-opt"]["lower_bound"]  # Autellix under the target at the highest rate
    assert abs(r["autellix_vs"]["mlfq"]["ratio"] - 3 / 1.25) < 1e-9
    # over the target at the lowest rate: its rate is below 1, so the ratio is over 3 / 1
    assert r["autellix_vs"]["vllm"]["ratio"] == 3.0 and r["autellix_vs"]["vllm"]["base_over"]
    assert report.cell(r["autellix_vs"]["vllm"]).startswith("> 3.00x")
    assert report.gap_load(rows) == 3
    assert sa.policy_of("lats", "autellix") == ("atlas", True) and sa.policy_of("bfcl", "vllm") == (
        "fcfs",
        False,
    )


def test_run_jobs_resumes_from_its_cache(monkeypatch, tmp_path):
    ran = []
    monkeypatch.setattr(sa, "run_point", lambda job: ran.append(job["load"]) or {"load": job["load"]})
    jobs = [{"kind": "sharegpt", "system": "vllm-opt", "load": x, "n": 3, "profile": "p"} for x in (0.4, 0.8)]
    cache = str(tmp_path / "rows.jsonl")
    assert sa.run_jobs(jobs[:1], 1, cache) == [{"load": 0.4}]
    assert sa.run_jobs(jobs, 1, cache) == [{"load": 0.4}, {"load": 0.8}]
    assert ran == [0.4, 0.8]  # the first point was read back, not run again
