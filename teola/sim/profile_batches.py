"""Timing batches on a real engine, as `teola profile` does (teola.sim.profiler, teola.sim.profile_llm):
unique prose prompts from the shipped corpora (salted so that no two share a prefix), a decoding
batch run through the engine's stream with progress events (its iteration time read directly), a
call timed on the loop's clock, and the engine's prefix cache emptied between batches."""

from __future__ import annotations

import asyncio
from typing import Any

from engines.protocol import StreamEvent
from teola.sim.fit import steady_steps

_WORDS: list[str] = []


def prose(n_words: int, salt: int) -> str:
    """Unique prose of n_words words from the shipped Wikipedia summaries (salted at the front so
    prompts share no prefix)."""
    if not _WORDS:
        from engines.assets.corpora import load_wiki_summaries

        for doc in load_wiki_summaries(n=400):
            _WORDS.extend(doc["text"].split())
    start = (salt * 97) % max(1, len(_WORDS) - n_words)
    return f"Case {salt}: " + " ".join(_WORDS[start : start + n_words])


async def timed_steps(
    engine: Any, reqs: list[dict[str, Any]]
) -> tuple[float, list[Any], list[tuple[float, int, int]]]:
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
        await reset_prefix_cache(engine)
    _, _, steps = await run_batch(engine, [prose(words, salt + i) for i in range(batch)], out, None)
    return steps


async def run_batch(
    engine: Any, texts: list[str], out: int, sampling: dict[str, Any] | None
) -> tuple[float, list[Any], dict[str, Any] | None]:
    """Decode `out` tokens (EOS ignored) after each of `texts` as one batch: seconds, results, and
    steady_steps' dict (None when the window held too few gaps)."""
    reqs = [
        {"parts": [["question", t]], "max_tokens": out, "ignore_eos": True, **(sampling or {})} for t in texts
    ]
    took, res, events = await timed_steps(engine, reqs)
    return took, res, steady_steps(events, [r["num_prompt_tokens"] for r in res])


async def timed(coro: Any) -> tuple[float, Any]:
    """Seconds on the loop's clock (real here; virtual when a simulated engine is profiled in tests)."""
    clock = asyncio.get_running_loop().time
    t = clock()
    out = await coro
    return clock() - t, out


async def reset_prefix_cache(engine: Any) -> bool:
    """Empty the engine's prefix cache (a coroutine on vLLM, a plain call on the simulated engine)."""
    out = engine.reset_prefix_cache()
    if asyncio.iscoroutine(out):
        out = await out
    return out is not False
