"""`teola profile`: measure this machine's real engines and fit the simulator's cost models.

For an app (default: advanced_rag on the embedded engines) it starts the app's engines, answers a
few variants of the app's sample query (recording every LLM call's output length: the simulator's
length sampler), then times controlled batches on each engine directly:
- LLM (vllm): prefills of prompts of several lengths, and batches of 1..max_num_seqs prompts of two
  lengths decoding a fixed number of tokens (ignore_eos), streamed with progress events so that the
  time between a request's tokens, once every request of the batch decodes, is the engine's decode
  iteration measured directly; fitted per iteration (teola.sim.fit);
- embedding / reranker: batches of chunk-sized and query-sized texts, and of both mixed; base + per
  item + per token + per token padded to the batch's longest text;
- pgvector: ingestion batches and top-k searches in a scratch namespace; base + per item;
- last, how much the LLM and the other compute engines slow each other when they run at once
  (teola.sim.contention: the profile's "device" entry).
It writes a profile (engines/sim/profile.py's format, provenance "measured") with every fit's
per-sample error, and for the embedding / reranker engines the max efficient batch they ran with (a
machine setting, engines/tuning/settings.py), which simulated runs of the profile then use. Prompts are prose from the shipped corpora, each unique, so nothing hits the
prefix cache by accident; the two output lengths of a decode batch share their prompts, with the
prefix cache emptied before each (where the engine can), so their difference is decode alone.
"""
from __future__ import annotations

import asyncio
import datetime
import platform
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engines.protocol import StreamEvent
from engines.requests import PrimOp
from engines.tuning.settings import SETTING_KEYS
from teola.api.app import App
from teola.sim.contention import profile_contention
from teola.sim.fit import fit_linear, fit_llm, fit_tokens, steady_steps
from teola.sim.run import query_variants

Say = Callable[[str], None]


_WORDS: list[str] = []


def _prose(n_words: int, salt: int) -> str:
    """Unique prose of n_words words from the shipped Wikipedia summaries (salted at the front so
    prompts share no prefix)."""
    if not _WORDS:
        from engines.assets.corpora import load_wiki_summaries
        for doc in load_wiki_summaries(n=400):
            _WORDS.extend(doc["text"].split())
    start = (salt * 97) % max(1, len(_WORDS) - n_words)
    return f"Case {salt}: " + " ".join(_WORDS[start:start + n_words])


async def _timed_steps(engine: Any, reqs: list[dict[str, Any]]) -> tuple[float, list[Any], list[tuple[float, int, int]]]:
    """Run a decoding batch through the engine's stream with progress events: seconds, results, and
    (seconds since start, request index, tokens decoded so far) per event, from which steady_steps
    reads the engine's iteration time directly."""
    clock = asyncio.get_running_loop().time
    t = clock()
    results: list[Any] = [None] * len(reqs)
    events: list[tuple[float, int, int]] = []
    async for i, kind, value in engine.stream("decoding", [r | {"progress": True} for r in reqs]):
        if kind == StreamEvent.PROGRESS:
            events.append((clock() - t, i, value.tokens))
        elif kind == StreamEvent.FINAL:
            results[i] = value
    return clock() - t, results, events


async def decode_step(engine: Any, batch: int, words: int, out: int, salt: int) -> dict[str, Any] | None:
    """One decode batch as the profile times it (`batch` prompts of `words` words of prose, each
    decoding `out` tokens, from an empty prefix cache when the engine can empty it): steady_steps'
    dict (the streamed iteration time), or None when the window held too few gaps."""
    if hasattr(engine, "reset_prefix_cache"):
        await _reset(engine)
    _, _, steps = await _run_batch(engine, [_prose(words, salt + i) for i in range(batch)], out, None)
    return steps


async def _run_batch(engine: Any, texts: list[str], out: int,
                     sampling: dict[str, Any] | None) -> tuple[float, list[Any], dict[str, Any] | None]:
    """Decode `out` tokens (EOS ignored) after each of `texts` as one batch: seconds, results, and
    steady_steps' dict (None when the window held too few gaps)."""
    reqs = [{"parts": [["question", t]], "max_tokens": out, "ignore_eos": True, **(sampling or {})} for t in texts]
    took, res, events = await _timed_steps(engine, reqs)
    return took, res, steady_steps(events, [r["num_prompt_tokens"] for r in res])


async def _timed(coro: Any) -> tuple[float, Any]:
    """Seconds on the loop's clock (real here; virtual when a simulated engine is profiled in tests)."""
    clock = asyncio.get_running_loop().time
    t = clock()
    out = await coro
    return clock() - t, out


async def profile_llm(engine: Any, say: Say, quick: bool = False,
                      sampling: dict[str, Any] | None = None, repeats: int = 1,
                      retime_spread: float | None = 0.15) -> dict[str, Any]:
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
    from teola.compile.chunking import count_tokens
    salt = iter(range(10_000))
    await engine.execute("prefilling", [{"parts": [["question", _prose(50, next(salt))]], "max_tokens": 1}])  # warm-up
    samples, tokens = [], []
    for words in ((30, 300, 900) if quick else (30, 150, 400, 800, 1200)):
        for _ in range(1 if quick else 2):
            text = _prose(words, next(salt))
            took, [r] = await _timed(engine.execute("prefilling", [{"parts": [["question", text]], "max_tokens": 1}]))
            samples.append({"texts": [text], "out_tokens": 0, "seconds": took, "prompt_tokens": r["num_prompt_tokens"]})
            tokens.append((count_tokens(text), r["num_prompt_tokens"]))
    max_seqs = int(getattr(engine.profile, "max_batch", 8) or 8)
    batches = sorted({1, 2, 4, max_seqs} if not quick else {1, max_seqs})
    cells = [(b, words, out) for b in batches for words in ((30, 400) if not quick else (30,))
             for out in ((8, 40) if not quick else (8, 24))]
    samples += await _decode_samples(engine, cells, repeats, salt, sampling, say, retime_spread)
    ratio, template = fit_tokens(tokens)
    settings = {"token_ratio": ratio, "template_tokens": template, "max_num_seqs": max_seqs,
                "max_num_batched_tokens": int(getattr(engine, "step_tokens", 0) or 2048),
                "max_model_len": int(getattr(engine.profile, "context_window", 0) or 2048),
                "block_size": int(getattr(engine, "block_size", None) or 16)}
    # the fit replays batches on the virtual clock: its own event loop, so not on this running one
    cost, report = await asyncio.to_thread(fit_llm, samples, settings)
    curve = cost.get("decode_batch_factor") or []
    say(f"llm: fitted {', '.join(f'{k}={v:.3g}' for k, v in cost.items() if k != 'decode_batch_factor')}"
        + (f", decode batch curve {', '.join(f'{b}: x{f:.2f}' for b, f in curve)}" if curve else "")
        + f" (mean abs error {report['mean_abs_error']:.1%} over {len(samples)} batches)")
    return {**settings, "num_blocks": 65536, "cost": cost, "fit": report}


async def _decode_samples(engine: Any, cells: list[tuple[int, int, int]], repeats: int, salt: Any,
                          sampling: dict[str, Any] | None, say: Say,
                          retime_spread: float | None = None) -> list[dict[str, Any]]:
    """One sample per (batch size, prompt words, output tokens) cell, timed once per round for
    `repeats` rounds, and `repeats` more for the cells whose runs spread over `retime_spread` (see
    profile_llm)."""
    # the two output lengths of a (batch, words) decode the same prompts from an empty prefix cache,
    # so their time difference is decode steps alone; an engine that cannot empty its cache gets new
    # prompts every run
    same = hasattr(engine, "reset_prefix_cache")
    texts = {(b, words): [_prose(words, next(salt)) for _ in range(b)] for b, words, _ in cells}
    runs: dict[tuple[int, int, int], list[tuple[float, list[Any], dict[str, Any] | None]]] = {c: [] for c in cells}
    order = random.Random(0)

    async def one_round(todo: list[tuple[int, int, int]]) -> None:
        for b, words, out in todo:
            if not (same and await _reset(engine)):
                texts[(b, words)] = [_prose(words, next(salt)) for _ in range(b)]
            runs[(b, words, out)].append(await _run_batch(engine, texts[(b, words)], out, sampling))

    for rnd in range(repeats):
        # every round in a new order: the machine's speed drifts over minutes, and a shape timed only
        # at one moment would carry that drift into the fit as if it were the shape's cost
        todo = list(cells)
        if rnd:
            order.shuffle(todo)
        await one_round(todo)
        say(f"llm: decode round {rnd + 1}/{repeats} measured ({len(cells)} batches)")
    unsettled = [c for c in cells if repeats > 1 and retime_spread is not None and _spread(runs[c]) > retime_spread]
    for _round in range(repeats if unsettled else 0):
        todo = list(unsettled)
        order.shuffle(todo)
        await one_round(todo)
    if unsettled:
        still = [c for c in unsettled if _spread(runs[c][repeats:]) > retime_spread]
        say(f"llm: {len(unsettled)} batch(es) whose {repeats} runs spread over {retime_spread:.0%} timed "
            f"{repeats} more times" + (f"; still unsettled: {', '.join(f'{b}x{w} words/{o} tokens' for b, w, o in still)}"
                                       if still else ""))
    samples = []
    for b, words, out in cells:
        done = runs[(b, words, out)]
        times, res, steps = [t for t, _, _ in done], done[-1][1], [x for _, _, x in done]
        sample = {"texts": texts[(b, words)], "out_tokens": out, "seconds": statistics.median(times),
                  "prompt_tokens": sum(r["num_prompt_tokens"] for r in res) // b}
        if all(steps):
            sample["steps"] = {"decode_seqs": b, "step_s": statistics.median(x["step_s"] for x in steps),
                               "context_tokens": round(statistics.median(x["context_tokens"] for x in steps)),
                               "gaps": sum(x["gaps"] for x in steps)}
            if repeats > 1:
                sample["steps"]["runs"] = [round(x["step_s"], 6) for x in steps]
        samples.append(sample | ({"runs": [round(t, 5) for t in times]} if repeats > 1 else {}))
    return samples


def _spread(done: list[tuple[float, list[Any], dict[str, Any] | None]]) -> float:
    """(max - min) / median of a cell's runs: of its streamed step times when every run has one,
    else of its batch times."""
    xs = [x["step_s"] for _, _, x in done] if done and all(x for _, _, x in done) else [t for t, _, _ in done]
    mid = statistics.median(xs) if xs else 0.0
    return (max(xs) - min(xs)) / mid if mid > 0 else 0.0


async def _reset(engine: Any) -> bool:
    """Empty the engine's prefix cache (a coroutine on vLLM, a plain call on the simulated engine)."""
    out = engine.reset_prefix_cache()
    if asyncio.iscoroutine(out):
        out = await out
    return out is not False


async def profile_linear(engine: Any, op: str, make: Callable[[int, int], dict[str, Any]],
                         sizes: tuple[int, ...], lengths: tuple[int, ...]) -> dict[str, Any]:
    """Time batches of `sizes` requests of texts of `lengths` words, and (batches of 2 or more, two
    lengths or more) of one longest text with shortest ones, whose padding to the longest text
    separates per_token from per_padded_token; fit base/per_item/per_token/per_padded_token."""
    from teola.compile.chunking import count_tokens
    await engine.execute(op, [make(lengths[0], 0)])  # warm-up
    samples, salt = [], 1
    for n in sizes:
        mixes = [[w] * n for w in lengths]
        if n > 1 and len(lengths) > 1:
            mixes.append([max(lengths)] + [min(lengths)] * (n - 1))
        for words in mixes:
            reqs = [make(w, salt + i) for i, w in enumerate(words)]
            salt += n
            took, _ = await _timed(engine.execute(op, reqs))
            tokens = [count_tokens(str(r.get("text", ""))) + count_tokens(str(r.get("query", ""))) for r in reqs]
            samples.append({"items": n, "tokens": sum(tokens), "padded": n * max(tokens), "seconds": took})
    cost, report = fit_linear(samples)
    return {"cost": cost, "fit": report}


def add_lengths(lengths: dict[str, list[int]], trace: Sequence[Mapping[str, Any]],
                field: str = "num_output_tokens") -> None:
    """Add one query's LLM output lengths (from its trace) to `lengths` by kind, as the simulated
    LLM samples them: "split" for a call that returns an item list, whether pipelined (counted once,
    at its first item) or one decode (its trace entry says "split"), "text" for other decodes.
    field="num_prompt_tokens": the same calls' prompt lengths instead."""
    for tr in trace:
        if "num_output_tokens" not in tr or "fused_into" in tr:
            continue
        if tr["op"] == PrimOp.PARTIAL_DECODING:
            if tr["primitive"].endswith("[0]"):
                lengths.setdefault("split", []).append(int(tr.get(field) or 0))
        elif tr["op"] == PrimOp.DECODING:
            lengths.setdefault("split" if tr.get("split") else "text", []).append(int(tr.get(field) or 0))


async def record_lengths(app: App, n: int, say: Say) -> dict[str, list[int]]:
    """Output lengths of the app's LLM calls over n variants of its sample query."""
    lengths: dict[str, list[int]] = {"text": [], "split": []}
    for i, q in enumerate(query_variants(app.sample()[0], n)):
        add_lengths(lengths, (await app.run(q)).trace)
        say(f"sample query {i + 1}/{n} answered")
    return {k: sorted(v) for k, v in lengths.items() if v}


def provenance_note(app: App) -> str:
    return (f"measured by `teola profile` on {platform.node()} ({platform.processor() or platform.machine()}, "
            f"{_cores()} cores) at {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC "
            f"with the engines of app {app.name!r}")


def _cores() -> int:
    import os
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


async def profile_app(app: App, name: str, say: Say, queries: int = 4, quick: bool = False,
                      repeats: int = 1) -> dict[str, Any]:
    """Everything above for one app's engines; returns the profile dict. `repeats`: timings of each
    LLM decoding batch (profile_llm)."""
    await app.start()
    try:
        return await profile_started(app, name, say, queries, quick, repeats)
    finally:
        await app.stop()


async def profile_started(app: App, name: str, say: Say, queries: int = 4, quick: bool = False,
                          repeats: int = 1) -> dict[str, Any]:
    """profile_app on an app already started (a benchmark that measures its engines in the same run
    as the workload it then simulates, so both see the same machine)."""
    lengths = await record_lengths(app, queries, say) if queries else {}
    engines: dict[str, Any] = {}
    handles: dict[str, Any] = {}
    for ename, spec in app.engines.items():
        handle = handles[spec.kind] = app.runtime.instances[ename][0].handle
        say(f"profiling engine {ename!r} ({spec.kind})")
        engines[spec.kind] = await _profile_kind(spec.kind, handle, say, quick, repeats)
        if "max_efficient_batch" in SETTING_KEYS.get(spec.kind, ()):  # a machine setting: simulate with it
            engines[spec.kind]["max_efficient_batch"] = spec.max_efficient_batch
    if "vllm" in engines and lengths:
        engines["vllm"]["lengths"] = lengths
    out = {"name": name, "provenance": "measured", "source": provenance_note(app), "engines": engines}
    device = await profile_contention(handles, _prose, say, repeats=2 if quick else 5)
    if device is not None:
        out["device"] = device
    return out


async def _profile_kind(kind: str, handle: Any, say: Say, quick: bool, repeats: int = 1) -> dict[str, Any]:
    sizes = (1, 8) if quick else (1, 4, 16, 32)
    if kind == "vllm":
        return await profile_llm(handle, say, quick, repeats=repeats)
    if kind == "sentence_transformers":
        fit = await profile_linear(handle, "embedding", lambda w, s: {"text": _prose(w, s)}, sizes, (12, 220))
        return {"op_cost": {"embedding": fit["cost"]}, "fit": {"embedding": fit["fit"]}}
    if kind == "reranker":
        # one query per batch, as a rerank primitive sends its query's hits: the default bi-encoder
        # encodes each distinct query once, so a query per pair would time twice the sequences
        query = _prose(12, 0)
        fit = await profile_linear(handle, "reranking", lambda w, s: {"query": query, "text": _prose(w, s)},
                                   sizes, (60, 220))
        return {"op_cost": {"reranking": fit["cost"]}, "fit": {"reranking": fit["fit"]}}
    if kind == "pgvector":
        return await _profile_pgvector(handle, sizes)
    raise ValueError(f"teola profile cannot measure engines of kind {kind!r} yet")


async def _profile_pgvector(handle: Any, sizes: tuple[int, ...]) -> dict[str, Any]:
    ns = f"teola-profile-{int(time.time())}"
    vec = [1.0] + [0.0] * 383
    try:
        ingest = await profile_linear(handle, "ingestion", lambda w, s: {
            "namespace": ns, "text": _prose(w, s), "embedding": vec, "meta": {}}, sizes + (64,), (200,))
        search = await profile_linear(handle, "searching", lambda w, s: {
            "namespace": ns, "embedding": vec, "top_k": 16}, sizes, (0,))
    finally:
        drop = getattr(handle, "drop_namespace", None)
        if drop is not None:
            result = drop(ns)
            if asyncio.iscoroutine(result):
                await result
    return {"op_cost": {"ingestion": ingest["cost"], "searching": search["cost"]},
            "fit": {"ingestion": ingest["fit"], "searching": search["fit"]}}
