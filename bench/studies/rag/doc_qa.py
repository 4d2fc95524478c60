"""Document QA, teola vs the real LlamaIndex library, each with its shipped defaults, on the same engines:
latency alone and under Poisson load, LLM work per query, answer quality and retrieval recall.

Workload (`bench.lib.workloads.narrative_qa_queries`, fixed seed): NarrativeQA questions, each over its own
story summary hidden among other stories of the same dataset: "small" documents (the gold story and 2
others, ~9 chunks of 256 tokens) and "large" ones (the gold story and 28 others, ~100 chunks). Gold
answers and the gold story give answer quality (`bench.lib.quality`: a gold answer contained in the reply,
token F1) and retrieval recall (the gold story reached the final context).

Systems: **teola** runs the shipped apps (`apps/naive_rag.py`, `apps/advanced_rag.py`) as they are;
**LlamaIndex** (`bench/baselines/llamaindex_rag.py`) runs the same templates with its own splitter, ingestion,
retrievers, postprocessor and response synthesizer, with the response mode the template names (the
shipped defaults: tree_summarize for naive RAG, compact for advanced RAG; both pack chunks into the
context window) and LlamaIndex's own default prompt templates (QA, refine, summary, query generation).
A second table forces both systems into one other mode (refine) with the same prompt texts (teola's).
With --keep-expansion, advanced RAG also runs as "teola, expansion kept" (pass prune_covered_searches
off): the same app doing the expansion LLM call and the expanded searches the pass proves useless.
With --baselines, the Teola paper's baselines (bench.studies.rag.rag: LlamaDist runs the template as a \
module chain,
LlamaDistPC runs its parallel modules in parallel, every optimization pass off, with per-invocation (PO)
or throughput-oriented (TO) batching) also run on teola's runtime over the same engines.

Load: alone, the systems take turns, each query answered by every system before the next, the
order rotated per query (pages before issue 70's item 3 ran each system's queries in one block,
teola first); then at each rate each system runs the whole Poisson trace, the order rotated per
rate. The Poisson rates are fractions
of LlamaIndex's own single-query service rate (1 / its mean latency alone), so "1.0" offers LlamaIndex
exactly as much work as it does alone and higher fractions saturate it. Both systems see the same
queries at the same offsets; vLLM's prefix cache is emptied before every system's run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

import bench.studies.rag.doc_qa_page as doc_qa_page
from bench.lib.results import without_keys
from bench.studies.rag.doc_qa_options import (
    add_load_arguments,
    add_setup_arguments,
    add_system_arguments,
    settings_from,
)
from bench.studies.rag.doc_qa_runs import bench
from bench.studies.rag.doc_qa_systems import SERVER_URLS, Settings
from bench.studies.rag.rag_analysis import exclusive_engines
from bench.studies.rag.rag_setup import make_apps


def markdown(data: dict[str, Any], command: str) -> str:
    """The page of one run, described by this study's docstring."""
    return doc_qa_page.markdown(data, command, __doc__ or "")


async def _main(s: Settings, quick: bool, command: str, out: str = "doc_qa") -> dict[str, Any]:
    from bench.lib.plots import write_load_plot
    from bench.lib.results import machine, results_dir
    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    from bench.studies.rag.rag_setup import ENGINE_OVERRIDES

    overrides: dict[str, dict[str, Any]] = (
        {"embedding": {"max_efficient_batch": s.embedding_batch}} if s.embedding_batch else {}
    )
    if ENGINE_OVERRIDES.get("llm", {}).get("kind", "vllm") == "vllm":
        overrides["llm"] = {"step_stats": True}  # vLLM's tokens per decode step, per system and point
    apps = make_apps(s.apps, overrides, bench_tuning=False)
    for app in apps.values():
        await app.start()
    t0 = time.perf_counter()
    try:
        data = await bench(apps, s)
        data["exclusive_engines"] = sorted({e for a in apps.values() for e in exclusive_engines(a.runtime)})
    finally:
        for app in apps.values():
            await app.stop()
    spec = next((a.engines.get("embedding") for a in apps.values() if "embedding" in a.engines), None)
    data.update(
        seconds=time.perf_counter() - t0,
        quick=quick,
        machine=machine(),
        command=command,
        embedding_batch_used=spec.max_efficient_batch if spec is not None else None,
        remote_llm=ENGINE_OVERRIDES.get("llm", {}).get("kind") == "openai",
    )
    md = markdown(data, command)
    here = results_dir("rag")
    folder = here / "quick" if quick else here  # quick runs stay out of the index
    folder.mkdir(parents=True, exist_ok=True)
    # the records stay (the trials study pools them) without their texts, in compact JSON
    (folder / f"{out}.json").write_text(
        json.dumps(without_keys(data, "reply", "context"), separators=(",", ":"), default=str)
    )
    (folder / f"{out}.md").write_text(md)
    write_load_plot(out, folder)
    print(md)
    return data


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench doc_qa` (bench.studies.rag.doc_qa_options)."""
    add_load_arguments(p)
    add_system_arguments(p)
    add_setup_arguments(p)


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench doc_qa` (argv: the options given, for its page)."""
    s = settings_from(args, p)
    command = "python -m bench doc_qa " + " ".join(a for a in (argv))
    if args.cross_encoder_shape:
        import bench.studies.rag.rag_setup as rag_setup

        rag_setup.ENGINE_OVERRIDES["reranker"] = {
            **rag_setup.ENGINE_OVERRIDES.get("reranker", {}),
            "cross_encoder_shape": True,
        }
    if args.no_core_lending:
        import bench.studies.rag.rag_setup as rag_setup

        for engine in ("llm", "embedding", "reranker"):
            rag_setup.ENGINE_OVERRIDES[engine] = {
                **rag_setup.ENGINE_OVERRIDES.get(engine, {}),
                "share_cores": False,
            }
    if args.langgraph:
        if not args.remote_llm:
            p.error(
                "--langgraph needs --remote-llm: LangGraph's ChatOpenAI calls an OpenAI-compatible server"
            )
        s.langgraph = True
    if args.remote_llm:
        return remote_main(s, args.quick, command.strip(), args.out)
    asyncio.run(_main(s, args.quick, command.strip(), args.out))
    return 0


def remote_main(s: Settings, quick: bool, command: str, out: str) -> int:
    """The same runs with the LLM served by `vllm serve` (issue 20): teola's apps use engine kind
    "openai" against it, LlamaIndex calls it with its own OpenAILike (bench/baselines/llamaindex_server.py),
    so both systems send their calls over HTTP to one server with the in-process adapter's settings."""
    import bench.studies.rag.rag_setup as rag_setup
    from engines.assets.paths import configure_engine_env
    from engines.vllm.serve import ServeProcess

    configure_engine_env()
    with ServeProcess("smollm2-135m-instruct", max_num_seqs=16) as url:
        rag_setup.ENGINE_OVERRIDES["llm"] = {"kind": "openai", "url": url, "model": "smollm2-135m-instruct"}
        SERVER_URLS[:] = [url]
        try:
            asyncio.run(_main(s, quick, command, out))
        finally:
            rag_setup.ENGINE_OVERRIDES.pop("llm", None)
            SERVER_URLS.clear()
    return 0
