"""bench.studies.sim.sim_fidelity's prompt-token calibration: the profile's token estimate is scaled so the
calibration queries' simulated prompts have the real prompts' token count (simulated apps, virtual
time)."""

from __future__ import annotations

import copy

import pytest

from bench.lib.workloads import doc_qa_queries
from bench.studies.sim.replay_lengths import calibrate_tokens
from engines.sim.profile import load_profile


def test_the_token_estimate_is_scaled_to_the_real_prompt_tokens():
    profile = copy.deepcopy(load_profile("cpu-smollm2-135m"))
    llm = profile["engines"]["vllm"]
    ratio, template = llm["token_ratio"], llm["template_tokens"]
    cal = doc_qa_queries(1, 10, "truthfulqa", 1000)
    simulated = 1.0 / calibrate_tokens(copy.deepcopy(profile), ("naive_rag",), cal, [1])
    assert simulated > 100  # one synthesis prompt over retrieved chunks
    scale = calibrate_tokens(profile, ("naive_rag",), cal, [int(simulated * 0.8)])
    assert scale == pytest.approx(0.8, abs=0.01)
    assert llm["token_ratio"] == pytest.approx(ratio * scale, rel=1e-3)
    assert llm["template_tokens"] == round(template * scale)
    # the scaled estimate now gives the real count (within the rounding of a template token)
    assert calibrate_tokens(
        copy.deepcopy(profile), ("naive_rag",), cal, [int(simulated * 0.8)]
    ) == pytest.approx(1.0, abs=0.02)


def test_each_trace_is_simulated_once_per_length_sampler_seed():
    from bench.studies.sim.sim_fidelity import make_plan, sim_side

    profile = copy.deepcopy(load_profile("cpu-smollm2-135m"))
    profile["engines"]["vllm"]["lengths"] = {"text": [4, 90]}  # two very different lengths
    plan = make_plan(("naive_rag",), 2, ("teola",), seed=0)
    one = sim_side(("naive_rag",), plan, profile, seeds=1)
    many = sim_side(("naive_rag",), plan, profile, seeds=6)
    assert {len(v) for v in one.values()} == {2} and {len(v) for v in many.values()} == {12}
    assert many[next(iter(many))][:2] == one[next(iter(one))]  # seed 0 first: the same draw as one seed
    assert len({round(x, 6) for v in many.values() for x in v}) > 2  # other seeds draw other lengths


def test_replayed_lengths_reach_the_calls_they_were_recorded_from():
    """LlamaDist's expansion is one decode returning an item list: recorded as "split", as the
    simulated LLM samples it, so replaying a run gives every call its own length back (a mismatch
    once gave the expansion's length to the synthesis call)."""
    from bench.lib.workloads import app_query
    from bench.studies.rag.rag_setup import SYSTEMS
    from bench.studies.sim.replay_lengths import call_lengths, on_simulated_apps, use_replay

    profile = copy.deepcopy(load_profile("cpu-smollm2-135m"))
    profile["engines"]["vllm"]["lengths"] = {"text": [3, 80], "split": [20, 40]}
    q = doc_qa_queries(1, 10, "truthfulqa", 0)[0]
    config, policy = SYSTEMS["LlamaDist-PO"]

    def decodes(trace: list[dict]) -> dict[str, int]:
        return {t["primitive"]: t["num_output_tokens"] for t in trace if t["op"] == "decoding"}

    async def body(apps):
        app = apps["advanced_rag"]
        app.runtime.set_policy(policy)
        out = []
        for _ in range(4):  # several draws of the sampler, each replayed
            first = (await app.run(app_query(q), {**config, "policy": policy})).trace
            lengths = call_lengths(first)
            use_replay(app, {q["question"]: lengths})
            again = (await app.run(app_query(q), {**config, "policy": policy})).trace
            use_replay(app, None)
            out.append((first, lengths, again))
        return out

    for first, lengths, again in on_simulated_apps(("advanced_rag",), profile, body):
        assert next(t for t in first if "expand" in t["primitive"] and t["op"] == "decoding").get("split")
        assert len(lengths["split"]) == 1 and len(lengths["text"]) == 1
        assert decodes(again) == decodes(first)


def test_a_replay_gives_each_call_its_recorded_prompt_length_with_or_without_its_output_length():
    """The real run's per-call prompt lengths reach the same calls (the simulated retrieval picks its
    own chunks, so its prompts differ from the real ones); outputs=False keeps the sampler's lengths."""
    from bench.lib.workloads import app_query
    from bench.studies.rag.rag_setup import SYSTEMS
    from bench.studies.sim.replay_lengths import call_lengths, on_simulated_apps, use_replay

    profile = copy.deepcopy(load_profile("cpu-smollm2-135m"))
    profile["engines"]["vllm"]["lengths"] = {"text": [30], "split": [20]}
    q = doc_qa_queries(1, 10, "truthfulqa", 0)[0]
    config, policy = SYSTEMS["LlamaDist-PO"]

    def decodes(trace: list[dict]) -> list[tuple[bool, int, int]]:
        return sorted(
            (bool(t.get("split")), t["num_prompt_tokens"], t["num_output_tokens"])
            for t in trace
            if t["op"] == "decoding"
        )

    async def body(apps):
        app = apps["advanced_rag"]
        app.runtime.set_policy(policy)
        recorded = call_lengths((await app.run(app_query(q), {**config, "policy": policy})).trace)
        recorded |= {"text": [7], "split": [11], "prompts": {"text": [333], "split": [222]}}
        out = []
        for outputs in (True, False):
            use_replay(app, {q["question"]: recorded}, outputs)
            out.append(decodes((await app.run(app_query(q), {**config, "policy": policy})).trace))
        use_replay(app, None)
        return out

    both, prompts_only = on_simulated_apps(("advanced_rag",), profile, body)
    assert both == [(False, 333, 7), (True, 222, 11)]
    assert prompts_only == [(False, 333, 30), (True, 222, 20)]


def test_calibration_records_the_call_kinds_each_system_makes():
    """LlamaDist's expansion is a one-decode "split" call that teola's advanced RAG does not make: a
    calibration run only as teola runs the queries left the sampler no split lengths, and every
    simulated expansion decoded its max_tokens."""
    from bench.studies.sim.replay_lengths import lengths_of, on_simulated_apps

    profile = copy.deepcopy(load_profile("cpu-smollm2-135m"))
    profile["engines"]["vllm"]["lengths"] = {"text": [30], "split": [20]}
    cal = doc_qa_queries(2, 10, "truthfulqa", 1000)

    async def body(apps):
        app = apps["advanced_rag"]
        return [await lengths_of(app, cal, None, system) for system in ("teola", "LlamaDist-PO")]

    teola, llamadist = on_simulated_apps(("advanced_rag",), profile, body)
    assert teola["split"] == [] and len(teola["text"]) == 2
    assert llamadist["split"] == [20, 20] and len(llamadist["text"]) == 2
