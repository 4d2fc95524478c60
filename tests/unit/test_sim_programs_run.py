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


def test_the_nocache_baseline_runs_fcfs_without_prefix_hits_and_token_latency_is_per_decoded_token():
    from bench.sim_programs import NOCACHE

    profile = load_profile("a100-llama3.1-8b")
    questions, filler, _ = load_texts(n_questions=50, n_docs=10)
    n = 4
    progs = workload(GENERATOR["sharegpt"], 0.0, n, 1, [1], **SHAPES["sharegpt"])
    cached = run_once(profile, "sharegpt", "fcfs", 0.0, n, 1, "drop", questions, filler)
    plain = run_once(profile, "sharegpt", NOCACHE, 0.0, n, 1, "drop", questions, filler)
    assert plain["calls"] == cached["calls"] and plain["output_tokens"] == cached["output_tokens"]
    assert plain["cached_tokens"] == 0 < cached["cached_tokens"]
    assert plain["prompt_tokens"] == cached["prompt_tokens"]  # same prompts, only none from a cache
    assert plain["mean"] > cached["mean"]  # every resent conversation is prefilled again
    # token latency: each program's latency over its decoded tokens, averaged over programs
    decoded = {p.pid: sum(c.output for c in p.calls) for p in progs}
    ends = {}
    for c in cached["log"]:
        ends[c["program"]] = max(ends.get(c["program"], 0.0), c["end"])
    arrivals = {p.pid: p.arrival for p in progs}
    want = sum((ends[k] - arrivals[k]) / decoded[k] for k in decoded) / n
    assert abs(cached["tok_mean"] - want) < 1e-6 * want + 1e-9
