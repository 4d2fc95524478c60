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
machine setting, engines/tuning/settings.py), which simulated runs of the profile then use. Prompts are prose
from the shipped corpora, each unique, so nothing hits the prefix cache by accident; the two output lengths of
a decode batch share their prompts, with the prefix cache emptied before each (where the engine can), so their
difference is decode alone.
"""

from __future__ import annotations

import asyncio
import datetime
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engines.requests import PrimOp
from engines.tuning.settings import SETTING_KEYS
from teola.api.app import App
from teola.sim.contention import profile_contention
from teola.sim.fit import fit_linear
from teola.sim.profile_batches import prose, timed
from teola.sim.profile_llm import profile_llm
from teola.sim.run import query_variants

Say = Callable[[str], None]


async def profile_linear(
    engine: Any,
    op: str,
    make: Callable[[int, int], dict[str, Any]],
    sizes: tuple[int, ...],
    lengths: tuple[int, ...],
) -> dict[str, Any]:
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
            took, _ = await timed(engine.execute(op, reqs))
            tokens = [
                count_tokens(str(r.get("text", ""))) + count_tokens(str(r.get("query", ""))) for r in reqs
            ]
            samples.append({"items": n, "tokens": sum(tokens), "padded": n * max(tokens), "seconds": took})
    cost, report = fit_linear(samples)
    return {"cost": cost, "fit": report}


def add_lengths(
    lengths: dict[str, list[int]], trace: Sequence[Mapping[str, Any]], field: str = "num_output_tokens"
) -> None:
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
    return (
        f"measured by `teola profile` on {platform.node()} ({platform.processor() or platform.machine()}, "
        f"{_cores()} cores) at {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC "
        f"with the engines of app {app.name!r}"
    )


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


async def profile_app(
    app: App, name: str, say: Say, queries: int = 4, quick: bool = False, repeats: int = 1
) -> dict[str, Any]:
    """Everything above for one app's engines; returns the profile dict. `repeats`: timings of each
    LLM decoding batch (profile_llm)."""
    await app.start()
    try:
        return await profile_started(app, name, say, queries, quick, repeats)
    finally:
        await app.stop()


async def profile_started(
    app: App, name: str, say: Say, queries: int = 4, quick: bool = False, repeats: int = 1
) -> dict[str, Any]:
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
    device = await profile_contention(handles, prose, say, repeats=2 if quick else 5)
    if device is not None:
        out["device"] = device
    return out


async def _profile_kind(kind: str, handle: Any, say: Say, quick: bool, repeats: int = 1) -> dict[str, Any]:
    sizes = (1, 8) if quick else (1, 4, 16, 32)
    if kind == "vllm":
        return await profile_llm(handle, say, quick, repeats=repeats)
    if kind == "sentence_transformers":
        fit = await profile_linear(handle, "embedding", lambda w, s: {"text": prose(w, s)}, sizes, (12, 220))
        return {"op_cost": {"embedding": fit["cost"]}, "fit": {"embedding": fit["fit"]}}
    if kind == "reranker":
        # one query per batch, as a rerank primitive sends its query's hits: the default bi-encoder
        # encodes each distinct query once, so a query per pair would time twice the sequences
        query = prose(12, 0)
        fit = await profile_linear(
            handle, "reranking", lambda w, s: {"query": query, "text": prose(w, s)}, sizes, (60, 220)
        )
        return {"op_cost": {"reranking": fit["cost"]}, "fit": {"reranking": fit["fit"]}}
    if kind == "pgvector":
        return await _profile_pgvector(handle, sizes)
    raise ValueError(f"teola profile cannot measure engines of kind {kind!r} yet")


async def _profile_pgvector(handle: Any, sizes: tuple[int, ...]) -> dict[str, Any]:
    ns = f"teola-profile-{int(time.time())}"
    vec = [1.0] + [0.0] * 383
    try:
        ingest = await profile_linear(
            handle,
            "ingestion",
            lambda w, s: {"namespace": ns, "text": prose(w, s), "embedding": vec, "meta": {}},
            sizes + (64,),
            (200,),
        )
        search = await profile_linear(
            handle, "searching", lambda w, s: {"namespace": ns, "embedding": vec, "top_k": 16}, sizes, (0,)
        )
    finally:
        drop = getattr(handle, "drop_namespace", None)
        if drop is not None:
            result = drop(ns)
            if asyncio.iscoroutine(result):
                await result
    return {
        "op_cost": {"ingestion": ingest["cost"], "searching": search["cost"]},
        "fit": {"ingestion": ingest["fit"], "searching": search["fit"]},
    }
