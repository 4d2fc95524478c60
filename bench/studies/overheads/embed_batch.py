"""The embedder's batch efficiency by chunk length: what its max efficient batch should be.

    python -m bench embed_batch [--chunks 96] [--threads 1]

The embedder (all-MiniLM-L6-v2 through engines.sentence_transformers.embedding, with the hardware default \
settings teola
runs it with: on a CPU machine one torch thread, one batch at a time) embeds the same chunks in
batches of 1..64, one batch after another, and the best of 2 passes gives chunks per second at each
batch size, for two kinds of text:
  - "short": the ~20-token sentences `teola tune`'s batch probe used before this page;
  - "app": 256-token chunks (the shipped apps' chunk size, 30 overlap, teola.compile.chunking) of the
    NarrativeQA stories the document-QA benchmark indexes.
The knee of each curve (engines.machine.knee: the smallest batch within 10% of the best throughput) is the
max efficient batch stage decomposition would split indexing at. LlamaIndex's embedder batch (its
`embed_batch_size` default, 10) is measured too. Nothing else runs meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from bench.lib.results import write_results
from bench.lib.tables import machine_facts, num, table

BATCHES = (1, 2, 4, 8, 10, 16, 32, 64)


async def curve(engine: Any, texts: list[str]) -> dict[int, float]:
    """{batch size: chunks per second} embedding all `texts` in batches of that size (best of 2)."""
    out = {}
    for b in BATCHES:
        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            for i in range(0, len(texts), b):
                await engine.execute("embedding", [{"text": t} for t in texts[i : i + b]])
            best = min(best, time.perf_counter() - t0)
        out[b] = len(texts) / best
    return out


async def run(n: int, threads: int | None) -> dict[str, Any]:
    from engines.machine.knee import knee
    from engines.sentence_transformers.embedding import EmbeddingEngine
    from engines.tuning.settings import resolve_options
    from engines.tuning.tune import CHUNKS, app_chunks

    options = resolve_options("sentence_transformers", {"max_batch": max(BATCHES)}, tuned={})
    if threads is not None:
        options["torch_threads"] = threads
    engine = EmbeddingEngine("embed-batch", **options)
    await engine.start()
    try:
        texts = {"short": (CHUNKS * (n // len(CHUNKS) + 1))[:n], "app": app_chunks(n)}
        await engine.execute("embedding", [{"text": t} for t in texts["app"][:16]])  # warm-up
        curves = {kind: await curve(engine, t) for kind, t in texts.items()}
    finally:
        await engine.stop()
    knees = {kind: knee({b: b / cps for b, cps in c.items()}) for kind, c in curves.items()}
    return {
        "chunks": n,
        "options": {k: v for k, v in options.items() if k != "max_batch"},
        "curves": curves,
        "knees": knees,
    }


def markdown(data: dict[str, Any], command: str) -> str:
    m = data.get("machine", {})
    lines = [
        "## Embedder batch efficiency by chunk length (max efficient batch)",
        "",
        f"Command: `{command}`. {machine_facts(m)} Embedder settings: {data['options']}.",
        "",
        (__doc__ or "").split("\n\n", 2)[2].strip(),
        "",
    ]
    lines += table(
        ["chunks", *(f"batch {b}" for b in BATCHES), "knee"],
        (
            [f"{kind} ({data['chunks']})", *(f"{num(c[b])}/s" for b in BATCHES), data["knees"][kind]]
            for kind, c in data["curves"].items()
        ),
    )
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench embed_batch`."""
    p.add_argument("--chunks", type=int, default=96, help="chunks embedded per batch size (default 96)")
    p.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: teola's hardware default)"
    )
    p.add_argument("--out", default="embed_batch")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench embed_batch` (argv: the options given, for its page)."""
    if args.chunks < max(BATCHES):
        p.error(f"--chunks must be >= {max(BATCHES)}")
    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    data = asyncio.run(run(args.chunks, args.threads))
    command = "python -m bench embed_batch " + " ".join(argv)
    write_results(args.out, data, markdown(data, command.strip()), subject="overheads")
    return 0
