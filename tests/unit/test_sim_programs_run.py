"""bench.sim_programs end to end on a simulated engine in virtual time (a few programs): the
sharegpt shape's user turns reach the engine at about their drawn size, and the call log gives the
saturated capacity."""
from __future__ import annotations

from bench.programs import workload
from bench.programs_vllm import load_texts
from bench.sim_programs import GENERATOR, SHAPES, run_once, saturated_capacity
from engines.sim_profile import load_profile


def test_sharegpt_programs_run_with_their_user_turns():
    profile = load_profile("a100-llama3.1-8b")
    questions, filler, _ = load_texts(n_questions=50, n_docs=10)
    n = 4
    progs = workload(GENERATOR["sharegpt"], 0.0, n, 1, [1], **SHAPES["sharegpt"])
    r = run_once(profile, "sharegpt", "fcfs", 0.0, n, 1, "drop", questions, filler)
    assert r["calls"] == sum(len(p.calls) for p in progs)
    assert r["output_tokens"] == sum(c.output for p in progs for c in p.calls)  # exact lengths (ignore_eos)
    first = {c["program"]: c for c in r["log"] if c["call"] == 0}
    for p in progs:
        drawn = p.calls[0].user
        # the first prompt: system turn + chat template + the user turn (its question may overshoot a small draw)
        assert drawn * 0.95 < first[p.pid]["prompt"] < drawn * 1.05 + 120  # + ~80 of system turn and template
    # later calls resend the conversation: most of it comes from the prefix cache
    later = [c for c in r["log"] if c["call"] > 0]
    if later:
        assert sum(c["cached"] for c in later) > 0.5 * sum(c["prompt"] for c in later)
    assert saturated_capacity(r["log"], n, 64) == n / max(c["end"] for c in r["log"])
