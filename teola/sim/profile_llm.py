"""`teola profile`'s LLM engine (teola.sim.profiler): prefills of prompts of several lengths, then
decode batches of 1..max_num_seqs prompts of two lengths decoding a fixed number of tokens, timed over
shuffled rounds (re-timed when their runs spread), fitted per iteration (teola.sim.fit.fit_llm)."""

from __future__ import annotations

import asyncio
import random
import statistics
from collections.abc import Callable, Iterator
from typing import Any

from teola.sim.fit import fit_llm, fit_tokens
from teola.sim.profile_batches import prose, reset_prefix_cache, run_batch, timed

Say = Callable[[str], None]
Run = tuple[float, list[Any], dict[str, Any] | None]  # one timed batch: seconds, results, steady_steps' dict


async def profile_llm(
    engine: Any,
    say: Say,
    quick: bool = False,
    sampling: dict[str, Any] | None = None,
    repeats: int = 1,
    retime_spread: float | None = 0.15,
) -> dict[str, Any]:
    """Measure and fit a vLLM engine; returns its profile entry. `sampling` (e.g. {"temperature":
    0.8, "seed": 7}) goes into every decoding request, so a model served with sampling gets a fit of
    its own (on GPU vLLM a seeded request samples with its own generator, a slower path). `repeats`:
    how many rounds time every decoding batch once each, every round after the first in a new
    (seeded) shuffled order; a sample keeps the median over the rounds (and every run in "runs"),
    since a per-step cost is the small difference of two such times and the machine's speed drifts
    while the rounds run. With repeats > 1, a batch whose runs spread by more than `retime_spread` of
    their median (max - min, of its streamed step times) is timed `repeats` more times, in shuffled
    rounds of the unsettled batches alone, and keeps the median of all its runs; None never re-times."""
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    salt = iter(range(10_000))
    samples, tokens = await prefill_samples(engine, salt, quick)
    max_seqs = int(getattr(engine.profile, "max_batch", 8) or 8)
    batches = sorted({1, 2, 4, max_seqs} if not quick else {1, max_seqs})
    cells = [
        (b, words, out)
        for b in batches
        for words in ((30, 400) if not quick else (30,))
        for out in ((8, 40) if not quick else (8, 24))
    ]
    samples += await decode_samples(engine, cells, repeats, salt, sampling, say, retime_spread)
    ratio, template = fit_tokens(tokens)
    settings = {
        "token_ratio": ratio,
        "template_tokens": template,
        "max_num_seqs": max_seqs,
        "max_num_batched_tokens": int(getattr(engine, "step_tokens", 0) or 2048),
        "max_model_len": int(getattr(engine.profile, "context_window", 0) or 2048),
        "block_size": int(getattr(engine, "block_size", None) or 16),
    }
    # the fit replays batches on the virtual clock: its own event loop, so not on this running one
    cost, report = await asyncio.to_thread(fit_llm, samples, settings)
    curve = cost.get("decode_batch_factor") or []
    say(
        f"llm: fitted {', '.join(f'{k}={v:.3g}' for k, v in cost.items() if k != 'decode_batch_factor')}"
        + (f", decode batch curve {', '.join(f'{b}: x{f:.2f}' for b, f in curve)}" if curve else "")
        + f" (mean abs error {report['mean_abs_error']:.1%} over {len(samples)} batches)"
    )
    return {**settings, "num_blocks": 65536, "cost": cost, "fit": report}


async def prefill_samples(
    engine: Any, salt: Iterator[int], quick: bool
) -> tuple[list[dict[str, Any]], list[tuple[int, int]]]:
    """After a warm-up, one prefill (max_tokens 1) per prompt length, twice unless `quick`: the
    samples, and (teola's token count, the engine's) per prompt for the token ratio."""
    from teola.compile.chunking import count_tokens

    await engine.execute(
        "prefilling", [{"parts": [["question", prose(50, next(salt))]], "max_tokens": 1}]
    )  # warm-up
    samples, tokens = [], []
    for words in (30, 300, 900) if quick else (30, 150, 400, 800, 1200):
        for _ in range(1 if quick else 2):
            text = prose(words, next(salt))
            took, [r] = await timed(
                engine.execute("prefilling", [{"parts": [["question", text]], "max_tokens": 1}])
            )
            samples.append(
                {"texts": [text], "out_tokens": 0, "seconds": took, "prompt_tokens": r["num_prompt_tokens"]}
            )
            tokens.append((count_tokens(text), r["num_prompt_tokens"]))
    return samples, tokens


async def decode_samples(
    engine: Any,
    cells: list[tuple[int, int, int]],
    repeats: int,
    salt: Any,
    sampling: dict[str, Any] | None,
    say: Say,
    retime_spread: float | None = None,
) -> list[dict[str, Any]]:
    """One sample per (batch size, prompt words, output tokens) cell, timed once per round for
    `repeats` rounds, and `repeats` more for the cells whose runs spread over `retime_spread` (see
    profile_llm)."""
    # the two output lengths of a (batch, words) decode the same prompts from an empty prefix cache,
    # so their time difference is decode steps alone; an engine that cannot empty its cache gets new
    # prompts every run
    same = hasattr(engine, "reset_prefix_cache")
    texts = {(b, words): [prose(words, next(salt)) for _ in range(b)] for b, words, _ in cells}
    runs: dict[tuple[int, int, int], list[Run]] = {c: [] for c in cells}
    order = random.Random(0)

    async def one_round(todo: list[tuple[int, int, int]]) -> None:
        for b, words, out in todo:
            if not (same and await reset_prefix_cache(engine)):
                texts[(b, words)] = [prose(words, next(salt)) for _ in range(b)]
            runs[(b, words, out)].append(await run_batch(engine, texts[(b, words)], out, sampling))

    for rnd in range(repeats):
        # every round in a new order: the machine's speed drifts over minutes, and a shape timed only
        # at one moment would carry that drift into the fit as if it were the shape's cost
        todo = list(cells)
        if rnd:
            order.shuffle(todo)
        await one_round(todo)
        say(f"llm: decode round {rnd + 1}/{repeats} measured ({len(cells)} batches)")
    unsettled = [
        c for c in cells if repeats > 1 and retime_spread is not None and _spread(runs[c]) > retime_spread
    ]
    for _round in range(repeats if unsettled else 0):
        todo = list(unsettled)
        order.shuffle(todo)
        await one_round(todo)
    if unsettled:
        assert retime_spread is not None
        still = [c for c in unsettled if _spread(runs[c][repeats:]) > retime_spread]
        say(
            f"llm: {len(unsettled)} batch(es) whose {repeats} runs spread over {retime_spread:.0%} timed "
            f"{repeats} more times"
            + (
                f"; still unsettled: {', '.join(f'{b}x{w} words/{o} tokens' for b, w, o in still)}"
                if still
                else ""
            )
        )
    return [
        _cell_sample(texts[(b, words)], b, out, runs[(b, words, out)], repeats) for b, words, out in cells
    ]


def _cell_sample(texts: list[str], b: int, out: int, done: list[Run], repeats: int) -> dict[str, Any]:
    """The sample of one (batch size, prompt words, output tokens) cell from its runs: the median
    batch time and, when every run streamed its steps, the median step time (every run's with
    repeats > 1)."""
    times, res, steps = [t for t, _, _ in done], done[-1][1], [x for _, _, x in done]
    sample: dict[str, Any] = {
        "texts": texts,
        "out_tokens": out,
        "seconds": statistics.median(times),
        "prompt_tokens": sum(r["num_prompt_tokens"] for r in res) // b,
    }
    if all(steps):
        sample["steps"] = {
            "decode_seqs": b,
            "step_s": statistics.median(x["step_s"] for x in steps),
            "context_tokens": round(statistics.median(x["context_tokens"] for x in steps)),
            "gaps": sum(x["gaps"] for x in steps),
        }
        if repeats > 1:
            sample["steps"]["runs"] = [round(x["step_s"], 6) for x in steps]
    return sample | ({"runs": [round(t, 5) for t in times]} if repeats > 1 else {})


def _spread(done: list[Run]) -> float:
    """(max - min) / median of a cell's runs: of its streamed step times when every run has one,
    else of its batch times."""
    xs = [x["step_s"] for _, _, x in done] if done and all(x for _, _, x in done) else [t for t, _, _ in done]
    mid = statistics.median(xs) if xs else 0.0
    return (max(xs) - min(xs)) / mid if mid > 0 else 0.0
