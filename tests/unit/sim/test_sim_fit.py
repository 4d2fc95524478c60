"""Fitting the simulator's cost models (teola.sim.fit) recovers known coefficients from synthetic
measurements, keeps coefficients non-negative, and reports per-sample errors."""

from __future__ import annotations

import pytest

from teola.sim.fit import LLM_TERMS, fit_linear, fit_llm, fit_tokens, llm_features, nnls

SETTINGS = {"token_ratio": 1.0, "template_tokens": 0, "max_num_batched_tokens": 512}


def test_the_llm_iteration_model_is_recovered_from_batches_timed_under_it():
    true = {"base": 0.01, "prefill_token": 2e-4, "decode_seq": 3e-3, "context_token": 1e-6}
    samples = []
    for batch in (1, 2, 4):
        for words in (20, 300):  # 4 x 303 tokens exceed the 512-token budget: chunked prefill
            for out in (0, 8, 32):
                texts = [" ".join([f"x{i}"] * words) for i in range(batch)]
                f = llm_features(texts, out, SETTINGS)
                samples.append(
                    {
                        "texts": texts,
                        "out_tokens": out,
                        "seconds": sum(true.get(t, 0.0) * x for t, x in zip(LLM_TERMS, f)),
                    }
                )
    cost, report = fit_llm(samples, SETTINGS)
    for term, value in true.items():
        assert cost[term] == pytest.approx(value, rel=1e-6)
    assert report["mean_abs_error"] < 1e-6 and len(report["samples"]) == len(samples)


def test_linear_costs_and_token_ratio_are_recovered():
    samples = [
        {"items": n, "tokens": n * k, "seconds": 0.01 + 0.002 * n + 1e-4 * n * k}
        for n in (1, 4, 16)
        for k in (10, 200)
    ]
    cost, _ = fit_linear(samples)
    assert cost == pytest.approx(
        {"base": 0.01, "per_item": 0.002, "per_token": 1e-4, "per_padded_token": 0.0}, rel=1e-6
    )
    assert fit_tokens([(w, int(w * 1.2) + 30) for w in (10, 100, 500)]) == (1.2, 27)


def test_the_padded_token_cost_is_told_apart_by_batches_of_unequal_texts():
    """A batch costs 0.01 + 1e-4 per token padded to its longest text: equal batches alone cannot
    separate that from a per-token cost; one 1-long + 3-short batch does (4 x 200 padded, not 230)."""
    seconds = lambda n, longest: 0.01 + 1e-4 * n * longest
    samples = [
        {"items": n, "tokens": n * k, "padded": n * k, "seconds": seconds(n, k)}
        for n in (1, 4)
        for k in (10, 200)
    ]
    samples.append({"items": 4, "tokens": 200 + 3 * 10, "padded": 4 * 200, "seconds": seconds(4, 200)})
    cost, report = fit_linear(samples)
    assert cost == pytest.approx(
        {"base": 0.01, "per_item": 0.0, "per_token": 0.0, "per_padded_token": 1e-4}, rel=1e-6, abs=1e-9
    )
    assert report["mean_abs_error"] < 1e-6


def test_a_batch_is_charged_its_tokens_summed_and_padded_to_the_longest():
    from engines.sim.sim_engine import SimEngine, linear_cost

    cost = {"base": 0.01, "per_item": 0.002, "per_token": 1e-4, "per_padded_token": 1e-3}
    # 3 texts of 2, 5 and 1 tokens: 0.01 + 3 x 0.002 + 8 x 1e-4 + 3 x 5 x 1e-3 = 0.0318
    assert linear_cost(cost, [2, 5, 1]) == pytest.approx(0.0318)
    assert linear_cost({"base": 0.01, "per_token": 1e-4}, [2, 5, 1]) == pytest.approx(
        0.0108
    )  # an older profile
    assert linear_cost(cost, []) == pytest.approx(0.01)
    engine = SimEngine("e", ["embedding"], op_cost={"embedding": cost}, record=False)
    texts = [{"text": "a b"}, {"text": "one, two. three"}, {"text": "x"}]  # 2, 5 and 1 counted tokens
    assert engine._delay("embedding", texts) == pytest.approx(0.0318)


def test_a_coefficient_the_data_would_make_negative_is_dropped_not_negative():
    rows = [[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]]
    y = [3.0, 2.0, 1.0]  # decreasing: an unconstrained slope would be -1
    coef = nnls(rows, y)
    assert coef[1] == 0.0 and coef[0] == pytest.approx(2.0)


def test_nnls_is_the_constrained_optimum_where_dropping_the_most_negative_term_is_not():
    """Unconstrained, base comes out most negative; dropping it and refitting leaves per_token alone
    (residual 1.86). The non-negative optimum keeps base alone (residual 0.87)."""
    rows = [[1.0, 0.0, 3.0], [1.0, 1.0, 3.0], [1.0, 1.0, 3.0], [1.0, 4.0, 4.0]]
    y = [6.0, 5.0, 5.0, 5.0]
    coef = nnls(rows, y)
    assert coef == pytest.approx([5.25, 0.0, 0.0], abs=1e-9)
    residual = sum((sum(c * x for c, x in zip(coef, r)) - t) ** 2 for r, t in zip(rows, y)) ** 0.5
    assert residual == pytest.approx(0.866, abs=1e-3)


def test_nnls_names_a_shape_mismatch():
    with pytest.raises(ValueError, match="one row of features per measurement"):
        nnls([[1.0, 2.0], [1.0, 3.0]], [1.0])


def _profiled(cost: dict, **settings) -> dict:
    """profile_llm's entry for a simulated engine with `cost`, run on the virtual clock."""
    from engines.sim.llm import SimLLM
    from teola.sim.profile_llm import profile_llm
    from teola.sim.virtual_loop import run_virtual

    async def main() -> dict:
        engine = SimLLM("llm", cost, **settings)
        await engine.start()
        try:
            return await profile_llm(engine, lambda _: None)
        finally:
            await engine.stop()

    return run_virtual(main())


def test_profiling_an_engine_with_a_known_cost_model_recovers_it():
    """`teola profile`'s LLM measurement and fit, pointed at a simulated engine on the virtual
    clock: the fitted iteration cost and token ratio are the engine's own."""

    true = {"base": 0.01, "prefill_token": 2e-4, "decode_seq": 3e-3, "context_token": 1e-6}
    entry = _profiled(true, max_num_seqs=4, max_num_batched_tokens=1024, token_ratio=1.25, template_tokens=20)
    assert entry["token_ratio"] == pytest.approx(1.25, abs=0.01) and abs(entry["template_tokens"] - 20) <= 1
    for term in ("base", "prefill_token", "decode_seq"):  # the terms that carry most of the time
        assert entry["cost"][term] == pytest.approx(true[term], rel=0.05)
    assert entry["fit"]["mean_abs_error"] < 0.02


def test_repeated_decode_timings_keep_the_median_so_one_slow_run_does_not_move_the_fit():
    """With repeats=3 every decoding batch is timed three times; a stall in one of them (here the
    second run of every batch waits 0.5 s more) is outvoted, so the fit is the engine's own cost."""
    import asyncio

    from engines.sim.llm import SimLLM
    from teola.sim.profile_llm import profile_llm
    from teola.sim.virtual_loop import run_virtual

    true = {"base": 0.01, "prefill_token": 2e-4, "decode_seq": 3e-3, "context_token": 1e-6}

    class Stalling(SimLLM):
        seen: dict = {}

        async def stream(self, op, requests):
            if op == "decoding":
                key = (tuple(r["parts"][0][1] for r in requests), requests[0]["max_tokens"])
                Stalling.seen[key] = Stalling.seen.get(key, 0) + 1
                if Stalling.seen[key] == 2:
                    await asyncio.sleep(0.5)
            async for event in super().stream(op, requests):
                yield event

    async def main() -> dict:
        engine = Stalling("llm", true, max_num_seqs=4, max_num_batched_tokens=1024)
        await engine.start()
        try:
            with pytest.raises(ValueError, match="repeats"):
                await profile_llm(engine, lambda _: None, repeats=0)
            return await profile_llm(engine, lambda _: None, repeats=3, retime_spread=None)
        finally:
            await engine.stop()

    entry = run_virtual(main())
    decoded = [s for s in entry["fit"]["samples"] if s["out_tokens"] > 0]
    assert decoded and all(len(s["runs"]) == 3 for s in decoded)
    assert all(sorted(s["runs"])[1] == pytest.approx(s["measured_s"], abs=1e-4) for s in decoded)
    assert all(max(s["runs"]) - min(s["runs"]) > 0.4 for s in decoded)  # each shape had its stalled run
    assert entry["cost"]["decode_seq"] == pytest.approx(true["decode_seq"], rel=0.05)


def test_a_batch_whose_runs_disagree_is_timed_again_and_only_that_batch():
    """Batches of 2 short prompts decoding 40 tokens stall 40 ms per token in their second run: their
    three runs spread far over 15%, so they are timed three more times (the others keep three runs),
    the profiler says so, and the median of six runs is the engine's own step."""
    import asyncio

    from engines.sim.llm import SimLLM
    from teola.sim.profile_llm import profile_llm
    from teola.sim.virtual_loop import run_virtual

    true = {"base": 0.01, "prefill_token": 2e-4, "decode_seq": 3e-3, "context_token": 1e-6}
    said: list[str] = []

    class Stalling(SimLLM):
        seen: dict = {}

        async def stream(self, op, requests):
            stall = (
                op == "decoding"
                and len(requests) == 2
                and requests[0]["max_tokens"] == 40
                and len(requests[0]["parts"][0][1].split()) < 100
            )
            if stall:
                Stalling.seen[op] = Stalling.seen.get(op, 0) + 1
            async for event in super().stream(op, requests):
                if stall and Stalling.seen[op] == 2 and event[1] == "progress":
                    await asyncio.sleep(0.04)
                yield event

    async def main() -> dict:
        engine = Stalling("llm", true, max_num_seqs=4, max_num_batched_tokens=1024)
        await engine.start()
        try:
            return await profile_llm(engine, said.append, repeats=3)
        finally:
            await engine.stop()

    entry = run_virtual(main())
    steps = {(s["batch"], s["prompt_tokens"] < 100, s["out_tokens"]): s for s in entry["fit"]["steps"]}
    stalled = steps[(2, True, 40)]
    assert len(stalled["runs"]) == 6 and max(stalled["runs"]) > 2 * min(stalled["runs"])
    assert all(len(s["runs"]) == 3 for k, s in steps.items() if k != (2, True, 40))
    own = true["base"] + 2 * true["decode_seq"] + true["context_token"] * stalled["context_tokens"]
    assert stalled["measured_s"] == pytest.approx(own, rel=0.02)
    assert any("1 batch(es) whose 3 runs spread over 15% timed 3 more times" in m for m in said)
    assert not any("still unsettled" in m for m in said)


def test_repeated_decode_rounds_time_every_batch_once_each_in_a_new_order():
    """Each round times every decoding batch once; rounds after the first go in a shuffled order, so
    a drift in the machine's speed lands on different batches in different rounds instead of on
    one batch's every run."""
    from engines.sim.llm import SimLLM
    from teola.sim.profile_llm import profile_llm
    from teola.sim.virtual_loop import run_virtual

    shapes: list = []

    class Recording(SimLLM):
        async def stream(self, op, requests):
            if op == "decoding":
                shapes.append(
                    (len(requests), len(requests[0]["parts"][0][1].split()), requests[0]["max_tokens"])
                )
            async for event in super().stream(op, requests):
                yield event

    async def main() -> dict:
        engine = Recording(
            "llm",
            {"base": 0.01, "prefill_token": 2e-4, "decode_seq": 3e-3, "context_token": 1e-6},
            max_num_seqs=4,
            max_num_batched_tokens=1024,
        )
        await engine.start()
        try:
            return await profile_llm(engine, lambda _: None, repeats=3)
        finally:
            await engine.stop()

    run_virtual(main())
    n = len(shapes) // 3
    rounds = [shapes[i * n : (i + 1) * n] for i in range(3)]
    assert n == 12 and len(shapes) == 36  # batches 1, 2, 4 x two prompt lengths x two output lengths
    assert all(sorted(r) == sorted(rounds[0]) and len(set(r)) == n for r in rounds)
    assert rounds[0] == sorted(rounds[0])  # the first round in the listed order
    assert rounds[1] != rounds[0] and rounds[2] != rounds[0] and rounds[1] != rounds[2]


def test_profiling_with_sampling_options_sends_them_with_every_decoding_request():
    """A model served with seeded sampling is fitted on requests that sample the same way."""
    from engines.sim.llm import SimLLM
    from teola.sim.profile_llm import profile_llm
    from teola.sim.virtual_loop import run_virtual

    seen: list[dict] = []

    class Recording(SimLLM):
        async def execute(self, op, requests):
            seen.extend({"op": op, **r} for r in requests)
            return await super().execute(op, requests)

        async def stream(self, op, requests):
            seen.extend({"op": op, **r} for r in requests)
            async for event in super().stream(op, requests):
                yield event

    async def main() -> None:
        engine = Recording("llm", {"base": 0.01, "decode_seq": 1e-3}, max_num_seqs=4)
        await engine.start()
        try:
            await profile_llm(engine, lambda _: None, quick=True, sampling={"temperature": 0.8, "seed": 7})
        finally:
            await engine.stop()

    run_virtual(main())
    decoding = [r for r in seen if r["op"] == "decoding"]
    assert decoding and all(r["temperature"] == 0.8 and r["seed"] == 7 for r in decoding)
    assert all("temperature" not in r for r in seen if r["op"] == "prefilling")


def test_pairs_of_batches_that_differ_only_in_output_length_are_decode_steps():
    s = lambda batch, prompt, out: {"batch": batch, "prompt_tokens": prompt, "out_tokens": out}
    samples = [s(1, 70, 0), s(1, 72, 8), s(1, 75, 24), s(1, 500, 24), s(32, 79, 24), s(32, 80, 8)]
    from teola.sim.fit import decode_pairs

    # the prefill (out 0) and the 500-token prompt pair with nothing; the batch of 32 pairs longer-last
    assert sorted(decode_pairs(samples)) == [(1, 2), (5, 4)]


def test_the_decode_step_time_is_fitted_from_the_pairs_not_left_to_the_totals():
    """Every measured batch carries a fixed 0.3 s the model has no term for (as a real engine's
    per-request overhead): fitted on totals alone it is spread over the terms and the per-step decode
    time of the large batch comes out half the measured one; the pairs' differences cancel it, so the
    fitted step is within 10% (the fit is still a compromise with the totals)."""
    from teola.sim.fit import fit_llm_rows

    true = {
        "base": 0.02,
        "prefill_token": 1e-3,
        "decode_seq": 2e-3,
        "context_token": 0.0,
        "prefill_attention": 0.0,
    }
    samples = []
    for batch in (1, 32):
        for out in (0, 8, 24) if batch == 1 else (8, 24):
            texts = [" ".join([f"x{i}"] * 60) for i in range(batch)]
            f = llm_features(texts, out, SETTINGS)
            seconds = sum(true[t] * x for t, x in zip(LLM_TERMS, f)) + 0.3
            samples.append(
                {"batch": batch, "prompt_tokens": 60, "out_tokens": out, "features": f, "measured_s": seconds}
            )
    _, report = fit_llm_rows(samples)
    steps = {d["batch"]: d for d in report["decode_steps"]}
    assert set(steps) == {1, 32}
    assert steps[32]["predicted_s"] == pytest.approx(steps[32]["measured_s"], rel=0.10)
    totals_only = nnls([s["features"] for s in samples], [s["measured_s"] for s in samples], relative=True)
    step_diff = [hi - lo for hi, lo in zip(samples[-1]["features"], samples[-2]["features"])]
    assert sum(c * x for c, x in zip(totals_only, step_diff)) < 0.6 * steps[32]["measured_s"]
    assert len(report["samples"]) == len(samples) and all("measured_s" in r for r in report["samples"])


def test_the_two_output_lengths_of_a_decode_batch_share_prompts_from_an_empty_cache():
    """Their time difference is then decode steps alone (no prefill of other prompt lengths in it)."""
    from engines.sim.llm import SimLLM
    from teola.sim.profile_llm import profile_llm
    from teola.sim.virtual_loop import run_virtual

    batches: list[tuple[int, tuple[str, ...], int]] = []

    class Recording(SimLLM):
        async def stream(self, op, requests):
            cached = 0
            async for event in super().stream(op, requests):
                if event[1] == "final":
                    cached += event[2]["num_cached_tokens"]
                yield event
            if op == "decoding":
                batches.append((requests[0]["max_tokens"], tuple(r["parts"][0][1] for r in requests), cached))

    async def main() -> None:
        engine = Recording("llm", {"base": 0.01, "decode_seq": 1e-3}, max_num_seqs=4, block_size=16)
        await engine.start()
        try:
            await profile_llm(engine, lambda _: None, quick=True)
        finally:
            await engine.stop()

    run_virtual(main())
    assert [b[0] for b in batches] == [8, 24, 8, 24]  # batches of 1 and of 4
    for short, long in ((batches[0], batches[1]), (batches[2], batches[3])):
        assert short[1] == long[1] and long[2] == 0


def test_steady_steps_reads_the_iteration_time_where_every_request_decodes():
    """Two requests: the second's first token comes late (its prefill ran after the first's), and
    the first finishes early. Only gaps inside [last first token, first last token] count; a gap
    over two tokens (outputs read late) counts as two iterations of half the gap."""
    from teola.sim.fit import steady_steps

    events = [
        (0.0, 0, 1),
        (1.0, 0, 2),  # before request 1 decodes: iterations with a prefill in them
        (2.0, 0, 3),
        (2.0, 1, 1),
        (2.1, 0, 4),
        (2.1, 1, 2),
        (2.3, 0, 6),
        (2.3, 1, 4),
        (2.4, 0, 7),
        (2.4, 1, 5),
        (2.6, 1, 6),
        (3.0, 1, 7),
    ]  # request 0 ends at 2.4
    out = steady_steps(events, [100, 50])
    assert out["gaps"] == 8 and out["step_s"] == pytest.approx(0.1)
    # request 0 decodes from 103..106 tokens of context over its gaps (mean 104.5 over gap starts
    # 3, 4, 6 -> 103, 104, 106), request 1 from 51..54 (51, 52, 54)
    assert out["context_tokens"] == pytest.approx((103 + 104 + 106) / 3 + (51 + 52 + 54) / 3)
    assert steady_steps([(0.0, 0, 1), (0.1, 0, 2)], [10]) is None  # too few gaps
    assert steady_steps(events, [100, 50, 20]) is None  # a request that never decoded


def test_the_profile_measures_decode_iterations_directly_and_fits_them():
    """On a simulated engine with a context cost, the streamed step times are the engine's own
    iteration times, and the fitted model reproduces every one of them within 2%."""

    true = {"base": 0.03, "prefill_token": 2e-4, "decode_seq": 2e-3, "context_token": 2e-5}
    entry = _profiled(true, max_num_seqs=8, max_num_batched_tokens=1024)
    steps = entry["fit"]["steps"]
    assert {s["batch"] for s in steps} == {1, 2, 4, 8}
    for s in steps:
        own = (
            true["base"] + true["decode_seq"] * s["decode_seqs"] + true["context_token"] * s["context_tokens"]
        )
        assert s["measured_s"] == pytest.approx(own, rel=0.02)
        assert abs(s["error"]) < 0.02
    assert entry["cost"]["context_token"] == pytest.approx(true["context_token"], rel=0.1)
