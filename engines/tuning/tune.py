"""`teola tune`: short probes of the default engines on this machine that choose between candidate
settings, write the choice to `<cache>/engine-settings.json` (read whenever an engine is built; any
option given in `Engine(...)` still wins) and print what was measured.

Probes (CPU machines; on a GPU machine vLLM's defaults are kept and nothing is probed):
  1. vLLM layout: for each candidate (vLLM's own: separate worker process, "auto" binding; teola's
     hardware default: model in the engine-core process on cores 1..C-1) start SmolLM2, warm up, and
     time 4 concurrent requests of 32 greedy tokens. The faster layout wins.
  2. Embedder threads, under load: with the chosen vLLM layout decoding, embed 3 batches of 32
     chunks with torch_threads = 1 and = C; the candidate whose concurrent pair (decode + embed)
     finishes first wins (the embedder's setting also goes to the reranker, which shares its cores).
  3. Max efficient batch of the embedder and the reranker: with the chosen threads, the latency of
     batches of 1..64 chunks of the apps' size (256 tokens of shipped story text) alone; the knee of that
     curve (engines.machine.knee: the smallest batch within 10% of the best throughput) is what stage
     decomposition and batching fill up to.
About two minutes on 2 cores, most of it starting vLLM twice.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

from engines.assets.paths import cache_dir
from engines.machine.hardware import Hardware, detect
from engines.tuning.settings import TUNED_FILE, default_settings

DECODE = {
    "parts": [["user", "List ten rivers of Europe, one per line."]],
    "complete": True,
    "max_tokens": 32,
    "temperature": 0.0,
    "ignore_eos": True,
}
# short sentences: the embedder-threads probe (3), a small load beside vLLM's decode
CHUNKS = [
    f"Passage {i}: the river flows through the old town past the cathedral and the market square."
    for i in range(32)
]


_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)  # tokens as the apps' chunker counts them


def app_chunks(n: int, chunk_size: int = 256) -> list[str]:
    """`n` chunks of the shipped apps' size (`chunk_size` words and punctuation marks, as
    teola.compile.chunking counts them; consecutive windows, no overlap) cut from the shipped NarrativeQA
    story summaries: what indexing embeds. The batch curves (probe 3) use them because the curve's
    shape depends on text length: on ~20-token sentences batching pays up to batch 16, on 256-token
    chunks not at all on a CPU (bench/results/overheads/embed_batch.md)."""
    from engines.assets.corpora import load_narrativeqa

    out: list[str] = []
    for story in dict.fromkeys(r["passage"] for r in load_narrativeqa()):
        spans = [m.span() for m in _TOKEN.finditer(story)]
        out += [
            story[spans[i][0] : spans[min(i + chunk_size, len(spans)) - 1][1]]
            for i in range(0, len(spans), chunk_size)
        ]
        if len(out) >= n:
            return out[:n]
    raise ValueError(
        f"the shipped stories give only {len(out)} chunks of {chunk_size} tokens, fewer than {n}"
    )


async def _decode(engine: Any) -> float:
    t0 = time.perf_counter()
    await engine.execute("decoding", [dict(DECODE) for _ in range(4)])
    return time.perf_counter() - t0


async def probe_vllm(settings: dict[str, Any]) -> tuple[float, Any]:
    """(seconds for 4 x 32 tokens, the started engine) under one candidate layout."""
    from engines.vllm.engine import VLLMEngine

    engine = VLLMEngine("tune-llm", max_model_len=1024, max_num_seqs=4, **settings)
    await engine.start()
    await _decode(engine)  # warm-up
    return min([await _decode(engine) for _ in range(2)]), engine


async def probe_embedder(llm: Any, threads: int) -> float:
    """Makespan of a decode job and 3 embedding batches run together, embedder on `threads`."""
    from engines.sentence_transformers.embedding import EmbeddingEngine

    emb = EmbeddingEngine("tune-embedding", torch_threads=threads, exclusive=True)
    await emb.start()
    try:
        await emb.execute("embedding", [{"text": c} for c in CHUNKS])  # warm-up

        async def embed() -> None:
            for _ in range(3):
                await emb.execute("embedding", [{"text": c} for c in CHUNKS])

        t0 = time.perf_counter()
        await asyncio.gather(_decode(llm), embed())
        return time.perf_counter() - t0
    finally:
        await emb.stop()


BATCHES = (1, 2, 4, 8, 16, 32, 64)


async def probe_curve(
    kind: str, threads: int, batches: tuple[int, ...] = BATCHES, repeats: int = 2
) -> dict[int, float]:
    """{batch size: seconds} of the embedder or the reranker alone over `batches` (best of `repeats`
    per size)."""
    from engines.sentence_transformers.embedding import EmbeddingEngine
    from engines.sentence_transformers.reranker import RerankerEngine

    engine = (EmbeddingEngine if kind == "sentence_transformers" else RerankerEngine)(
        f"tune-{kind}", torch_threads=threads, exclusive=True, max_batch=max(batches)
    )
    op = "embedding" if kind == "sentence_transformers" else "reranking"
    chunks = app_chunks(max(batches))
    reqs = (
        [{"text": c} for c in chunks]
        if op == "embedding"
        else [{"query": "Who does the story say the hero travels with?", "text": c} for c in chunks]
    )
    await engine.start()
    try:
        await engine.execute(op, reqs[:8])  # warm-up
        curve = {}
        for b in batches:
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                await engine.execute(op, reqs[:b])
                times.append(time.perf_counter() - t0)
            curve[b] = min(times)
        return curve
    finally:
        await engine.stop()


async def tune_batches(
    chosen: dict[str, Any],
    rows: list[dict[str, Any]],
    say: Callable[[str], None],
    batches: tuple[int, ...] = BATCHES,
    repeats: int = 2,
) -> None:
    """Probe 3: each sentence-transformers engine's max efficient batch from its latency curve over
    `batches` (best of `repeats` per size)."""
    from engines.machine.knee import knee

    for kind in ("sentence_transformers", "reranker"):
        curve = await probe_curve(kind, chosen[kind]["torch_threads"], batches, repeats)
        best = knee(curve)
        chosen[kind]["max_efficient_batch"] = best
        rows.append(
            {
                "engine": kind,
                "candidate": f"max_efficient_batch={best}",
                "settings": {"curve": curve},
                "seconds": curve[best],
            }
        )
        say(
            f"{kind}: batch latency {', '.join(f'{b}: {t * 1e3:.0f} ms' for b, t in curve.items())} "
            f"-> max efficient batch {best}"
        )


async def tune(hw: Hardware, say: Callable[[str], None]) -> dict[str, Any]:
    """Run the probes; returns {"hardware", "measured": [rows], "chosen": {kind: settings}}."""
    if hw.gpu:
        say("GPU machine: vLLM's and torch's defaults are kept; nothing to probe")
        return {"hardware": hw.describe(), "measured": [], "chosen": {}}
    candidates = {
        "vLLM default layout": {"worker_process": True, "cpu_threads_bind": "auto"},
        "teola hardware default": default_settings("vllm", 0, 1, hw),
    }
    rows, best = [], None
    for label, settings in candidates.items():
        say(f"vllm: starting with {label} {settings} ...")
        seconds, engine = await probe_vllm(settings)
        rows.append({"engine": "vllm", "candidate": label, "settings": settings, "seconds": seconds})
        say(f"vllm: {label}: 4 x 32 tokens in {seconds:.2f} s")
        if best is None or seconds < best[0]:
            if best is not None:
                await best[2].stop()
            best = (seconds, settings, engine)
        else:
            await engine.stop()
    assert best is not None
    chosen: dict[str, Any] = {"vllm": best[1]}
    try:
        st_best = None
        for threads in sorted({1, hw.cores}):
            seconds = await probe_embedder(best[2], threads)
            rows.append(
                {
                    "engine": "sentence_transformers",
                    "candidate": f"torch_threads={threads}",
                    "settings": {"torch_threads": threads, "exclusive": True},
                    "seconds": seconds,
                }
            )
            say(f"embedding: torch_threads={threads} while vLLM decodes: {seconds:.2f} s")
            if st_best is None or seconds < st_best[0]:
                st_best = (seconds, threads)
    finally:
        await best[2].stop()
    st = {"torch_threads": st_best[1], "exclusive": True}
    chosen.update({"sentence_transformers": st, "reranker": dict(st)})
    await tune_batches(chosen, rows, say)
    return {"hardware": hw.describe(), "measured": rows, "chosen": chosen}


def run_tune(write: bool = True) -> int:
    """`teola tune`: probe, print the table, write the chosen settings (unless write=False)."""
    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    hw = detect()

    def say(msg: str) -> None:
        print(f"[teola tune] {msg}", flush=True)

    say(f"hardware: {hw.describe()}")
    result = asyncio.run(tune(hw, say))
    print(f"\n{'engine':<22} {'candidate':<24} {'seconds':>8}")
    for r in result["measured"]:
        print(f"{r['engine']:<22} {r['candidate']:<24} {r['seconds']:>8.2f}")
    print(f"\nchosen: {json.dumps(result['chosen'])}")
    if write:
        path = cache_dir() / TUNED_FILE
        path.write_text(json.dumps(result, indent=2))
        say(f"wrote {path} (options given in Engine(...) still win; delete the file to go back to defaults)")
    return 0
