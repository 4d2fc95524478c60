"""bench.studies.sim.speed_probe: the reference decode batch reads an engine's own iteration time, the
profile's step for its shape is found, and the table says which traces ran at the profile's speed."""

from __future__ import annotations

from types import SimpleNamespace

from bench.studies.sim.speed_probe import PROBE, probe, probe_lines, profile_step


def test_the_probe_reads_the_engines_own_decode_step():
    from engines.sim.llm import SimLLM
    from teola.sim.virtual_loop import run_virtual

    cost = {"base": 0.03, "prefill_token": 2e-4, "decode_seq": 2e-3, "context_token": 1e-5}

    async def main():
        engine = SimLLM("llm", cost, max_num_seqs=8, max_num_batched_tokens=1024)
        app = SimpleNamespace(
            engines={
                "embedding": SimpleNamespace(kind="sentence_transformers"),
                "llm": SimpleNamespace(kind="vllm"),
            },
            runtime=SimpleNamespace(instances={"llm": [SimpleNamespace(handle=engine)]}),
        )
        await engine.start()
        try:
            return await probe(app, salt=7), await probe(SimpleNamespace(engines={}), salt=0)
        finally:
            await engine.stop()

    step, none = run_virtual(main())
    # 4 prompts of about 40 tokens decoding 40: context per iteration between 4 x 41 and 4 x 80 tokens
    assert (
        cost["base"] + 4 * cost["decode_seq"] + 1e-5 * 160
        < step
        < cost["base"] + 4 * cost["decode_seq"] + 1e-5 * 340
    )
    assert none is None


def test_the_profile_step_of_the_probe_shape_is_its_short_prompt_batch():
    rows = [
        {"batch": 4, "prompt_tokens": 554, "out_tokens": 40, "measured_s": 0.05},
        {"batch": 4, "prompt_tokens": 84, "out_tokens": 8, "measured_s": 0.04},
        {"batch": 4, "prompt_tokens": 84, "out_tokens": 40, "measured_s": 0.03},
        {"batch": 2, "prompt_tokens": 84, "out_tokens": 40, "measured_s": 0.02},
    ]
    assert PROBE == (4, 30, 40)
    assert profile_step({"engines": {"vllm": {"fit": {"steps": rows}}}}) == 0.03
    assert profile_step({"engines": {"vllm": {}}}) is None


def test_the_table_counts_traces_whose_probes_both_stay_within_ten_percent():
    text = "\n".join(
        probe_lines(
            {
                "naive_rag|low|teola": [0.031, 0.036],
                "naive_rag|high|teola": [0.030, 0.032],
                "advanced_rag|low|teola": [None, 0.030],
            },
            0.030,
        )
    )
    assert "| naive_rag / low / teola | 31.0 | 36.0 | 1.03x / 1.20x |" in text
    assert "| advanced_rag / low / teola | - | 30.0 | 1.00x |" in text
    assert "1 of 3 traces ran with both probes within 10% of the profile's step." in text
    assert probe_lines({}, 0.03) == [] and probe_lines({"a": [0.03, 0.03]}, None) == []
