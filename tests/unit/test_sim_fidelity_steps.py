"""bench.sim_fidelity's per-iteration table: direct step measurements when the profile has them."""
from bench.sim_fidelity import iteration_check, markdown


def _profile(steps):
    return {"engines": {"vllm": {"fit": {"samples": [], "steps": steps}}}}


def test_the_direct_step_of_each_shape_comes_from_its_longest_output():
    row = lambda b, p, out, m, pr: {"batch": b, "prompt_tokens": p, "out_tokens": out, "decode_seqs": b,
                                    "context_tokens": b * (p + out // 2), "measured_s": m, "predicted_s": pr,
                                    "error": (pr - m) / m, "runs": [m, m * 1.2]}
    its = iteration_check(_profile([row(2, 75, 8, 0.09, 0.05), row(2, 75, 40, 0.05, 0.055),
                                    row(2, 600, 40, 0.08, 0.07)]))
    assert [(r["batch"], r["prompt_tokens"], r["measured_step_s"]) for r in its] == [(2, 75, 0.05), (2, 600, 0.08)]
    data = {"wall_s": 60, "profile_path": "p", "profile_source": "s", "seed": 0, "n": 1, "n_cal": 1,
            "load_before": 0, "load_after": 0, "real": {"naive_rag|low|teola": [2.0]},
            "sim": {"naive_rag|low|teola": [2.1]}, "iterations": its, "repeats": 2}
    text = markdown(data, "cmd")
    assert "| 2 | 75 | 190 | 50.0 | 50-60 | 55.0 | +10% |" in text
    assert "1 of 2 batch shapes within 10%" in text


def test_an_older_profile_falls_back_to_pairs_of_output_lengths():
    s = lambda out, m, p: {"batch": 1, "prompt_tokens": 70, "out_tokens": out, "measured_s": m, "predicted_s": p}
    its = iteration_check({"engines": {"vllm": {"fit": {"samples": [s(8, 1.0, 1.0), s(40, 4.2, 4.0)]}}}})
    assert len(its) == 1 and abs(its[0]["measured_step_s"] - 0.1) < 1e-9 and "direct" not in its[0]
