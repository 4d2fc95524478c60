"""bench.studies.sim.sim_programs end to end on a simulated engine in virtual time (a few programs): the
sharegpt shape's user turns reach the engine at about their drawn size, and the call log gives the
saturated capacity."""

from __future__ import annotations

from bench.studies.sim.program_setup import GENERATOR, SHAPES
from bench.studies.sim.sim_programs import run_once, saturated_capacity
from engines.sim.profile import load_profile
from teola.sim.program_runs import load_texts
from teola.sim.program_workloads import workload


def sharegpt_setup(n: int = 4):
    """The derived A100 profile, shipped texts and `n` sharegpt programs arriving at once."""
    profile = load_profile("a100-llama3.1-8b")
    questions, filler, _ = load_texts(n_questions=50, n_docs=10)
    return profile, questions, filler, workload(GENERATOR["sharegpt"], 0.0, n, 1, [1], **SHAPES["sharegpt"])


def test_sharegpt_programs_run_with_their_user_turns():
    n = 4
    profile, questions, filler, progs = sharegpt_setup(n)
    r = run_once(profile, "sharegpt", "fcfs", 0.0, n, 1, "drop", questions, filler)
    assert r["calls"] == sum(len(p.calls) for p in progs)
    assert r["output_tokens"] == sum(c.output for p in progs for c in p.calls)  # exact lengths (ignore_eos)
    first = {c["program"]: c for c in r["log"] if c["call"] == 0}
    for p in progs:
        drawn = p.calls[0].user
        # the first prompt: system turn + chat template + the user turn (its question may overshoot a small
        # draw)
        assert drawn * 0.95 < first[p.pid]["prompt"] < drawn * 1.05 + 120  # + ~80 of system turn and template
    # later calls resend the conversation: most of it comes from the prefix cache
    later = [c for c in r["log"] if c["call"] > 0]
    if later:
        assert sum(c["cached"] for c in later) > 0.5 * sum(c["prompt"] for c in later)
    assert saturated_capacity(r["log"], n, 64) == n / max(c["end"] for c in r["log"])


def test_the_nocache_baseline_runs_fcfs_without_prefix_hits_and_token_latency_is_per_decoded_token():
    from bench.studies.sim.program_setup import NOCACHE

    n = 4
    profile, questions, filler, progs = sharegpt_setup(n)
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


def test_equal_latency_table_reads_rates_at_each_target_and_marks_lower_bounds():
    from bench.studies.sim.program_setup import NOCACHE
    from bench.studies.sim.sim_programs_page import equal_latency_table

    curves = {
        "fcfs": (10, 12, 40),
        NOCACHE: (10, 30, 60),
        "mlfq": (10, 12, 40),
        "plas": (10, 11, 13),
        "atlas": (10, 20, 40),
    }
    rows = [
        {"policy": p, "rate": float(r), "mean": m, "tok_mean": m / 1000}
        for p, ms in curves.items()
        for r, m in zip((1, 2, 3), ms)
    ]
    lines = equal_latency_table({"rows": rows, "baseline": "fcfs"}, top=3.0)
    table = [ln for ln in lines if ln.startswith("| FCFS")]
    assert len(table) == 2 * 2 * 4  # 2 baselines x 2 metrics x 4 targets
    # FCFS, program latency, target 1.5 x 10 = 15 s: FCFS reaches it at 2 + 3/28 programs/s
    row = next(
        ln for ln in table if ln.startswith("| FCFS (`fcfs`) | mean program") and "1.5x (15.0 s)" in ln
    )
    cells = [c.strip() for c in row.strip("|").split("|")]
    f = 2 + 3 / 28
    assert cells[3] == f"{f:.3f}"
    # fcfs, mlfq (the same curve), plas (under 15 s at the highest rate: a lower bound), atlas (15 s at 1.5)
    assert cells[4:] == ["1.00x", "1.00x", f">= {3 / f:.2f}x", f"{1.5 / f:.2f}x"]
    # against the no-cache baseline, FCFS with the cache gets a column of its own
    row = next(
        ln
        for ln in table
        if ln.startswith("| FCFS, no prefix cache") and "mean program" in ln and "1.5x" in ln
    )
    cells = [c.strip() for c in row.strip("|").split("|")]
    g = 1 + 5 / 20  # no-cache reaches 15 s a quarter of the way from rate 1 to 2
    assert cells[3] == f"{g:.3f}" and cells[4] == f"{f / g:.2f}x"
    # a baseline that never reaches its target gives no ratio
    row = next(ln for ln in table if ln.startswith("| FCFS (`fcfs`) | mean program") and "10x" in ln)
    assert row.count("n/a") == 4 and ">= 3.000" in row
