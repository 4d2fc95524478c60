"""bench.studies.programs.programs, the simulated program study on teola's runtime in virtual time: the
balancer it names routes the programs (round-robin spreads a chat over both instances, locality keeps it), and
its page shows every run."""

from __future__ import annotations

from bench.studies.programs.programs import markdown
from bench.studies.sim.sim_programs import run_once
from engines.sim.profile import load_profile
from teola.sim.program_runs import load_texts


def test_the_named_balancer_routes_the_programs():
    profile = load_profile("a100-llama2-7b-measured")
    questions, filler, _ = load_texts(n_questions=50, n_docs=10)
    runs = {
        name: run_once(profile, "chat", "plas", 0.0, 8, 2, "drop", questions, filler, balancer=name)
        for name in ("locality", "round_robin")
    }
    assert runs["locality"]["calls"] == runs["round_robin"]["calls"]
    several = {name: r["programs_on_several_instances"] for name, r in runs.items()}
    multi_call = sum(1 for c in runs["locality"]["log"] if c["call"] == 1)  # programs with a second call
    assert several["round_robin"] > several["locality"] and multi_call > 0
    used = {name: len(r["calls_per_instance"]) for name, r in runs.items()}
    assert used["round_robin"] == 2


def test_the_page_shows_each_run():
    row = {"mean": 1.0, "p95": 2.0, "p99": 3.0, "preemptions": 4}
    single = {
        k: {
            "capacity": 1.0,
            "rows": [{"load": 0.8, "rate": 0.8, "policy": p, **row} for p in ("fcfs", "atlas")],
        }
        for k in ("chat", "tree")
    }
    bal = {
        "capacity": 2.0,
        "rows": [
            {
                "load": 0.8,
                "rate": 1.6,
                "balancer": "round_robin",
                "mean": 1.5,
                "p95": 2.5,
                "p99": 3.5,
                "prompt_tokens": 100,
                "cached_tokens": 40,
                "longest_prompt": 900,
                "programs_on_several_instances": 3,
            }
        ],
    }
    res = {
        "command": "python -m bench.studies.programs.programs --quick",
        "wall_s": 20.0,
        "profile": "p",
        "budget": 64,
        "queues": {"service": "tokens"},
        "programs": 40,
        "single": single,
        "balancers": bal,
        "throughput_ratio": {"target": 2.0, "fcfs_rate": 0.8, "atlas_rate": None, "ratio": None},
    }
    md = markdown(res)
    assert md.startswith("## SIMULATED") and "profile `p`" in md
    assert md.count("| 0.80 | 0.800 | ") == 4 and "| atlas | 1.00 | 2.00 | 3.00 | 4 |" in md
    assert "| 0.80 | 1.600 | round_robin | 1.50 | 2.50 | 3.50 | 100 | 40 | 900 | 3 |" in md
    assert "ATLAS/FCFS = n/a" in md
