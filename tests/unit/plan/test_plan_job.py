"""Offline jobs (teola.plan.job, teola.plan.workload) and the output-length sampler
(teola.plan.lengths): job files are validated with errors naming the field, each app template
builds the computation graph the paper describes, and sampled lengths follow the recorded eCDF."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from teola.plan.job import load_job, parse_job
from teola.plan.lengths import StageLengths, ecdf, from_records, load_lengths
from teola.plan.workload import build_workload

P7 = "a100-llama2-7b"


def _models(*names: str, **extra) -> dict:
    return {n: {"profile": P7, "max_tokens": 64, **extra} for n in names}


def test_sampled_lengths_follow_the_recorded_ecdf():
    recorded = [3] * 10 + [20] * 30 + [50] * 60
    s = StageLengths({"answer": recorded}, seed=1)
    draws = [s.sample("m", "answer", str(i), 1000) for i in range(4000)]
    assert set(draws) == {3, 20, 50}
    got = dict(ecdf(draws))
    for length, frac in ecdf(recorded):
        assert got[length] == pytest.approx(frac, abs=0.03)
    assert s.sample("m", "answer", "7", 1000) == s.sample(
        "m", "answer", "7", 1000
    )  # a pure function of the key
    assert all(s.sample("m", "answer", str(i), 25) <= 25 for i in range(100))  # capped at max_tokens
    assert s.sample("m", "other", "1", 99) == 99  # nothing recorded: max_tokens


def test_per_model_records_win_over_the_stage_and_traces_feed_the_sampler():
    s = from_records(
        [{"model": "a", "stage": "fuse", "num_output_tokens": 7}] * 5
        + [{"model": "b", "stage": "fuse", "num_output_tokens": 40}] * 5
    )
    assert {s.sample("a", "fuse", str(i), 100) for i in range(50)} == {7}
    assert {s.sample("c", "fuse", str(i), 100) for i in range(200)} == {7, 40}
    assert s.values("b", "fuse") == [40] * 5
    shipped = load_lengths("lengths-smollm2-135m")
    assert shipped.values("x", "answer") and min(shipped.values("x", "answer")) >= 1


def test_ensembling_builds_answers_and_a_fuser_that_reads_them():
    job = parse_job(
        {
            "app": "ensembling",
            "dataset": "truthfulqa",
            "requests": 5,
            "models": _models("a", "b", "f"),
            "answerers": ["a", "b"],
            "fuser": "f",
            "lengths": {"lengths": {"answer": [10], "fuse": [30]}},
        }
    )
    wl = build_workload(job)
    assert [len(wl.requests[m]) for m in "abf"] == [5, 5, 5] and wl.upstream["f"] == {"a", "b"}
    fuse = wl.requests["f"][2]
    assert fuse.deps == (("a", 2), ("b", 2)) and fuse.target == 30
    assert fuse.prompt > wl.requests["a"][2].prompt + 2 * 10 - 1  # the two answers are in the fuser's prompt


def test_routing_splits_requests_by_share_and_chain_summary_chains_chunks():
    job = parse_job(
        {"app": "routing", "requests": 400, "models": _models("a", "b"), "routes": {"a": 3, "b": 1}}
    )
    wl = build_workload(job)
    assert len(wl.requests["a"]) + len(wl.requests["b"]) == 400 and 250 < len(wl.requests["a"]) < 350
    job = parse_job(
        {
            "app": "chain_summary",
            "documents": 4,
            "chunk_words": 100,
            "models": _models("s", "e"),
            "summariser": "s",
            "evaluator": "e",
            "evaluations": 2,
        }
    )
    wl = build_workload(job)
    per_doc = Counter(r.group for r in wl.requests["s"])
    assert len(per_doc) == 4 and max(per_doc.values()) > 1
    chained = [r for r in wl.requests["s"] if r.after is not None]
    assert len(chained) == sum(per_doc.values()) - 4
    assert len(wl.requests["e"]) == 8 and all(r.deps[0][0] == "s" for r in wl.requests["e"])


@pytest.mark.parametrize(
    "change,message",
    [
        ({"app": "chat"}, "'app' must be one of"),
        ({"answerers": ["zz"]}, "answerer 'zz' is not one of"),
        ({"models": {"a": {"profile": P7, "max_tokens": 0}}}, "max_tokens must be a positive int"),
        ({"models": {"a": {"profil": P7}}}, "unknown keys"),
        ({"requests": "many"}, "'requests'"),
    ],
)
def test_bad_jobs_are_rejected_naming_the_field(change, message):
    job = {"app": "ensembling", "requests": 3, "models": _models("a"), "answerers": ["a"], **change}
    with pytest.raises(ValueError, match=message):
        parse_job(job)


def test_a_mix_needs_distinct_models_and_job_files_load(tmp_path):
    part = {"app": "routing", "requests": 3, "models": _models("a"), "routes": {"a": 1}}
    with pytest.raises(ValueError, match="must differ"):
        parse_job({"app": "mix", "parts": [part, part]})
    path = tmp_path / "job.json"
    path.write_text(
        json.dumps({"app": "mix", "parts": [part, {**part, "models": _models("b"), "routes": {"b": 1}}]})
    )
    job = load_job(path)
    assert sorted(job.models) == ["a", "b"] and len(build_workload(job).requests["b"]) == 3
    with pytest.raises(ValueError, match="not found"):
        load_job(tmp_path / "missing.json")


def test_the_shipped_sharegpt_lengths_make_the_output_limit_matter():
    """ShareGPT's reply lengths (the simulated studies' default) run past 256 tokens for about half
    the replies, so a 512-token limit gives longer outputs than a 256 one (SmolLM2's recorded
    lengths, mostly under 96 tokens, gave the same outputs under both)."""
    import json

    from teola.plan.lengths import LENGTH_FILES, load_lengths

    data = json.loads((LENGTH_FILES / "lengths-sharegpt-v3.json").read_text())
    assert "ShareGPT" in data["source"] and len(data["default"]) == 10_000
    lengths = load_lengths("lengths-sharegpt-v3")
    at = {cap: [lengths.sample("m", "answer", str(k), cap) for k in range(2000)] for cap in (256, 512)}
    assert max(at[256]) == 256 and sum(at[512]) > 1.2 * sum(at[256])
