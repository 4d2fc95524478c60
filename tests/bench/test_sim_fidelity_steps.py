"""bench.studies.sim.sim_fidelity's per-iteration table: direct step measurements when the profile has
them."""

import pytest

from bench.studies.sim.sim_fidelity_report import iteration_check, markdown


def _profile(steps):
    return {"engines": {"vllm": {"fit": {"samples": [], "steps": steps}}}}


def test_the_direct_step_of_each_shape_comes_from_its_longest_output():
    row = lambda b, p, out, m, pr: {
        "batch": b,
        "prompt_tokens": p,
        "out_tokens": out,
        "decode_seqs": b,
        "context_tokens": b * (p + out // 2),
        "measured_s": m,
        "predicted_s": pr,
        "error": (pr - m) / m,
        "runs": [m, m * 1.2],
    }
    its = iteration_check(
        _profile([row(2, 75, 8, 0.09, 0.05), row(2, 75, 40, 0.05, 0.055), row(2, 600, 40, 0.08, 0.07)])
    )
    assert [(r["batch"], r["prompt_tokens"], r["measured_step_s"]) for r in its] == [
        (2, 75, 0.05),
        (2, 600, 0.08),
    ]
    data = {
        "wall_s": 60,
        "profile_path": "p",
        "profile_source": "s",
        "seed": 0,
        "n": 1,
        "n_cal": 1,
        "load_before": 0,
        "load_after": 0,
        "real": {"naive_rag|low|teola": [2.0]},
        "sim": {"naive_rag|low|teola": [2.1]},
        "iterations": its,
        "repeats": 2,
    }
    text = markdown(data, "cmd")
    assert "| 2 | 75 | 190 | 50.0 | 50-60 | 55.0 | +10% |" in text
    assert "1 of 2 batch shapes within 10%" in text


def test_an_older_profile_falls_back_to_pairs_of_output_lengths():
    s = lambda out, m, p: {
        "batch": 1,
        "prompt_tokens": 70,
        "out_tokens": out,
        "measured_s": m,
        "predicted_s": p,
    }
    its = iteration_check({"engines": {"vllm": {"fit": {"samples": [s(8, 1.0, 1.0), s(40, 4.2, 4.0)]}}}})
    assert len(its) == 1 and abs(its[0]["measured_step_s"] - 0.1) < 1e-9 and "direct" not in its[0]


def _steps(rows):
    return {
        "engines": {
            "vllm": {
                "fit": {
                    "steps": [{"decode_seqs": b, "context_tokens": c, "measured_s": t} for b, c, t in rows]
                }
            }
        }
    }


def test_the_step_bound_is_zero_when_the_linear_form_fits_exactly():
    from bench.studies.sim.sim_fidelity_report import step_bound

    exact = [(b, c, 0.02 + 0.001 * b + 1e-6 * c) for b, c in ((1, 100), (2, 300), (4, 900), (16, 5000))]
    assert step_bound(_steps(exact)) == pytest.approx(0.0, abs=1e-6)


def test_the_step_bound_of_a_step_that_falls_with_the_batch_is_the_best_compromise():
    """Batch 1 at 30 ms and batch 4 at 25 ms with no context: a non-decreasing form at best predicts
    one value c for both; |c - 30| / 30 = |c - 25| / 25 gives c = 300 / 11 and a worst error 1/11."""
    from bench.studies.sim.sim_fidelity_report import step_bound

    assert step_bound(_steps([(1, 0, 0.030), (4, 0, 0.025)] * 2)) == pytest.approx(1 / 11, rel=1e-4)
    assert step_bound(_steps([(1, 0, 0.030)])) is None  # too few measurements to say anything


def test_the_prompt_table_compares_each_query_real_and_simulated_prompt_tokens():
    from bench.studies.sim.replay_lengths import call_lengths
    from bench.studies.sim.sim_fidelity_report import prompt_lines

    trace = [
        {
            "primitive": "a.call.prefill",
            "op": "prefilling",
            "num_prompt_tokens": 400,
            "fused_into": "a.call.decode",
            "num_output_tokens": 9,
            "started": 0.0,
        },
        {
            "primitive": "a.call.decode",
            "op": "decoding",
            "num_prompt_tokens": 400,
            "num_output_tokens": 9,
            "started": 0.0,
        },
    ]
    # the fused prefill counted once
    assert call_lengths(trace) == {
        "text": [9],
        "split": [],
        "prompts": {"text": [400], "split": []},
        "prompt": [400],
    }
    data = {
        "real_lengths": {
            "naive_rag|low|teola": {
                "q1": {"text": [9], "prompt": [400]},
                "q2": {"text": [5], "prompt": [200]},
            }
        },
        "replay_prompts": {"naive_rag|low|teola": {"q1": 300, "q2": 200}},
    }
    text = "\n".join(prompt_lines(data))
    assert "| naive_rag | low | teola | 300 | 250 | -17% | -25% +0% |" in text
    assert "correlate" not in text  # two queries: too few to say
    data["real_lengths"]["naive_rag|low|teola"]["q3"] = {"text": [7], "prompt": [100]}
    data["replay_prompts"]["naive_rag|low|teola"]["q3"] = 150
    data |= {
        "real": {"naive_rag|low|teola": [2.0, 1.0, 1.0]},
        "replay": {"naive_rag|low|teola": [1.5, 1.0, 1.5]},
    }
    # prompt errors -25%, 0%, +50% against latency errors -25%, 0%, +50%: perfectly correlated
    assert (
        "Over the 3 queries of these traces, a query's prompt-token error and its replayed latency error "
        "correlate at r = 1.00." in "\n".join(prompt_lines(data))
    )
    assert (
        prompt_lines({"real_lengths": {"k|r|s": {"q": {"text": [1]}}}, "replay_prompts": {"k|r|s": {"q": 5}}})
        == []
    )


def test_the_measured_traces_cannot_reuse_the_calibration_queries_seed(capsys):
    from bench.__main__ import main

    with pytest.raises(SystemExit):
        main(["sim_fidelity", "--profile", "fresh", "--seed", "1000"])
    assert "calibration queries' seed" in capsys.readouterr().err


def test_a_profile_with_a_batch_curve_shows_the_linear_part_and_the_held_out_factor():
    row = lambda p, m, lin, pr, held: {
        "batch": 4,
        "prompt_tokens": p,
        "out_tokens": 40,
        "decode_seqs": 4,
        "context_tokens": 4 * p,
        "measured_s": m,
        "linear_s": lin,
        "predicted_s": pr,
        "error": (pr - m) / m,
        "held_out_error": held,
    }
    its = iteration_check(
        _profile([row(80, 0.030, 0.036, 0.031, 0.05), row(600, 0.040, 0.044, 0.039, -0.12)])
    )
    data = {
        "wall_s": 60,
        "profile_path": "p",
        "profile_source": "s",
        "seed": 0,
        "n": 1,
        "n_cal": 1,
        "load_before": 0,
        "load_after": 0,
        "real": {"naive_rag|low|teola": [2.0]},
        "sim": {"naive_rag|low|teola": [2.1]},
        "iterations": its,
    }
    text = markdown(data, "cmd")
    assert "| 4 | 80 | 320 | 30.0 | - | 31.0 | +3% | 36.0 | +20% | +5% |" in text
    assert "2 of 2 batch shapes within 10%" in text and "errors are in sample" in text
    assert "The linear part alone: 1 of 2" in text and "other prompt size: 1 of 2" in text
