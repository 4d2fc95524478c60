"""Document QA's measurement: one query of each system, a run alone and under Poisson load, its
summary (bench.studies.rag.doc_qa runs it and writes the page)."""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from bench.lib.quality import score, texts
from bench.lib.results import percentile
from bench.lib.workloads import GOLD_SETS, app_query, poisson_arrivals
from bench.studies.rag.doc_qa_systems import (
    BASELINES,
    INFLIGHT_EVERY,
    INFLIGHT_PER,
    KEEP_EXPANSION,
    LANGGRAPH,
    QUERY_TIMEOUT,
    SERVER_URLS,
    SYSTEMS,
    TEOLA_PASSES,
    UNGATED,
    UNGATED_KEPT,
    Settings,
)
from bench.studies.rag.rag_analysis import (
    by_op_means,
    critical_path_bound,
    critical_path_shares,
    exclusive_engines,
    op_times,
)
from bench.studies.rag.rag_runs import KEEP, parents_of, run_open_loop
from bench.studies.rag.rag_setup import SYSTEMS as RAG_SYSTEMS
from bench.studies.rag.rag_setup import reset_prefix_cache, step_counts
from engines.requests import PrimOp


# ---- one query ----------------------------------------------------------------------------------
def llm_work(trace: list[dict[str, Any]]) -> dict[str, int]:
    """The work of one query from its engine trace: LLM calls, prompt tokens and decode tokens (a
    split decode's items are one call; a call's prompt is counted once, from its decode), prefill-only
    requests (partial prefillings handed to the engine; ones the graph scheduler dropped are not) and chunks
    written to the vector store (teola's ingestion requests, the baseline's ingested items)."""
    calls: dict[str, tuple[int, int]] = {}
    prefill_only = chunks = 0
    for t in trace:
        op = t.get("op")
        if op in ("decoding", "partial_decoding"):
            key = t["primitive"].split("[")[0]
            p, o = calls.get(key, (0, 0))
            calls[key] = (max(p, t.get("num_prompt_tokens") or 0), max(o, t.get("num_output_tokens") or 0))
        elif op == PrimOp.PARTIAL_PREFILLING and t.get("status", "ok") == "ok":
            prefill_only += 1
        elif op == PrimOp.INGESTION:
            chunks += int(t.get("requests") or t.get("batch_size") or 0)
    return {
        "calls": len(calls),
        "prompt_tokens": sum(p for p, _ in calls.values()),
        "decode_tokens": sum(o for _, o in calls.values()),
        "prefill_only": prefill_only,
        "chunks": chunks,
    }


def context_key(app: Any) -> str:
    """The object-store key of the chunks synthesis reads: reranked if the app reranks."""
    kinds = {n.kind: n.name for n in app.nodes}
    return f"{kinds['rerank']}.context" if "rerank" in kinds else f"{kinds['search']}.results"


async def teola_query(
    app: Any,
    q: dict[str, Any],
    nodes: dict[str, Any],
    arrival: float,
    passes: dict[str, Any] | None = None,
    policy: str = "topology",
) -> dict[str, Any]:
    t0 = time.perf_counter()
    key = context_key(app)
    cfg = {
        "nodes": nodes,
        "timeout": QUERY_TIMEOUT,
        "return_values": [key],
        "passes": passes or {},
        "policy": policy,
    }
    rec: dict[str, Any] = {"arrival": arrival, "documents": len(q["documents"])}
    trace: list[dict[str, Any]] = []
    try:
        compiled = app.compile(app_query(q), cfg)  # app.run, in its two steps: the e-graph is needed below
        rec.update(compile_s=compiled.seconds, parents=parents_of(compiled.egraph))
        result = await app.execute(compiled, cfg)
        trace = [{k: t.get(k) for k in KEEP if t.get(k) is not None} for t in result.trace]
        reply = str(result.output)
        context = texts(result.values.get(key))
        rec.update(
            ok=True,
            reply=reply[:300],
            context=context,
            **llm_work(result.trace),
            by_op=op_times(result.trace),
            **score(reply, context, q["answers"], q.get("gold")),
        )
    except Exception as exc:  # noqa: BLE001 -- a failed query is recorded and counted, the run goes on
        rec.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
    rec["latency"] = time.perf_counter() - t0
    if rec.get("ok"):  # the Fig. 11 shares and the critical-path bound, then the bulky e-graph goes
        rec.update(
            critical_path=critical_path_shares({**rec, "trace": trace}),
            bound=critical_path_bound(rec["parents"], trace, exclusive_engines(app.runtime)),
        )
    rec.pop("parents", None)
    return rec


async def library_query(rag: Any, q: dict[str, Any], arrival: float) -> dict[str, Any]:
    """One query of a library baseline (LlamaIndex or LangGraph: `aquery(question, documents)`)."""
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"arrival": arrival, "documents": len(q["documents"])}
    try:
        ans = await asyncio.wait_for(rag.aquery(q["question"], q["documents"]), QUERY_TIMEOUT)
        rec.update(
            ok=True,
            reply=ans.text[:300],
            context=list(ans.sources),
            **llm_work(ans.trace),
            by_op=op_times(ans.trace),
            **score(ans.text, ans.sources, q["answers"], q.get("gold")),
        )
    except Exception as exc:  # noqa: BLE001
        rec.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
    rec["latency"] = time.perf_counter() - t0
    return rec


# ---- runs ---------------------------------------------------------------------------------------
class Systems:
    """Both systems over one started app: `run(system, queries, arrivals or None)`."""

    def __init__(
        self, app: Any, nodes: dict[str, Any], prompts: str, names: tuple[str, ...] = SYSTEMS
    ) -> None:
        from bench.baselines.llamaindex_rag import LlamaIndexRAG

        self.app, self.nodes, self.names = app, nodes, names
        self.rag = LlamaIndexRAG.from_app(app, nodes, prompts)
        self.langgraph = None
        if LANGGRAPH in names:
            import bench.studies.rag.rag_setup as rag_setup
            from bench.baselines.langgraph_rag import LangGraphRAG

            if not SERVER_URLS:
                raise ValueError("the LangGraph baseline calls a `vllm serve` process: run with --remote-llm")
            model = rag_setup.ENGINE_OVERRIDES["llm"]["model"]
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

    async def run(
        self, system: str, queries: list[dict[str, Any]], arrivals: list[float] | None
    ) -> list[dict[str, Any]]:
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
    out.update(
        mean=statistics.fmean(lat),
        p50=percentile(lat, 50),
        p99=percentile(lat, 99),
        calls=mean("calls"),
        prompt_tokens=mean("prompt_tokens"),
        decode_tokens=mean("decode_tokens"),
        contains=mean("contains"),
        f1=mean("f1"),
    )
    for key in ("recall", "answer_in_context", "prefill_only"):
        if all(key in r for r in ok):
            out[key] = mean(key)
    if all(r.get("documents") and "chunks" in r for r in ok):
        out["chunks_per_doc"] = statistics.fmean(r["chunks"] / r["documents"] for r in ok)
    if all("by_op" in r for r in ok):
        out["by_op"] = by_op_means([r["by_op"] for r in ok])
    return out


async def compare(
    systems: Systems,
    queries: list[dict[str, Any]],
    n_alone: int,
    n_load: int,
    fractions: tuple[float, ...],
    seed: int,
    label: str,
    progress: bool = True,
    rates: tuple[float, ...] = (),
) -> dict[str, Any]:
    """Alone (the first `n_alone` queries), then at each rate (the first `n_load`): teola and
    LlamaIndex on the same queries and offsets (Poisson arrivals drawn with `seed`). The rates are
    `fractions` of LlamaIndex's service rate alone, or with `rates` those absolute rates (q/s; the
    fraction is then computed from the run)."""
    points: dict[str, Any] = {}
    alone = {}
    per: dict[str, list[dict[str, Any]]] = {system: [] for system in systems.names}
    steps: dict[str, dict[str, Any]] = {system: {} for system in systems.names}
    for i, q in enumerate(queries[:n_alone]):  # interleaved: each query by every system, the order rotated
        for system in rotated(systems.names, i):
            per[system] += await systems.run(system, [q], None)
            steps[system] = added(steps[system], systems.steps)
    for system in systems.names:
        alone[system] = summarize(per[system]) | {
            "records": per[system],
            "vllm_steps": steps[system],
            "server_inflight": systems.inflight,
        }
    points["alone"] = alone
    base = alone["LlamaIndex"].get("mean")
    if progress:
        print(
            f"[doc_qa] {label} alone: "
            + ", ".join(f"{s} {alone[s].get('mean', float('nan')):.2f} s" for s in systems.names),
            flush=True,
        )
    if not base:
        return points
    for f, rate in [(r * base, r) for r in rates] if rates else [(f, f / base) for f in fractions]:
        arrivals = poisson_arrivals(n_load, rate, seed)
        loaded = queries[:n_load]
        row = {"rate": rate, "fraction": f}
        for system in rotated(systems.names, len(points)):  # the systems' order rotated per rate
            recs = await systems.run(system, loaded, arrivals)
            row[system] = summarize(recs) | {
                "records": recs,
                "vllm_steps": systems.steps,
                "server_inflight": systems.inflight,
            }
        points[f"x{f:g}"] = row
        if progress:
            print(
                f"[doc_qa] {label} rate {rate:.3f} q/s ({f:.3g}x): "
                + ", ".join(f"{s} {row[s].get('mean', float('nan')):.2f} s" for s in systems.names),
                flush=True,
            )
    return points


def rotated(names: tuple[str, ...], k: int) -> tuple[str, ...]:
    """`names` starting at the k-th (mod len): no system always runs first."""
    k %= max(1, len(names))
    return names[k:] + names[:k]


def added(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two vLLM engine-step summaries (engines.vllm.step_stats) of one system's runs added up."""
    out = {**a, **b}
    for key in set(a) & set(b):
        if isinstance(a[key], (int, float)) and isinstance(b[key], (int, float)):
            out[key] = a[key] + b[key]
    if out.get("decode_steps"):
        out["tokens_per_decode_step"] = out.get("generated_tokens", 0) / out["decode_steps"]
    return out


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
        names = (
            SYSTEMS
            + ((KEEP_EXPANSION,) if kept else ())
            + ((UNGATED,) if s.ungated and not kept else ())
            + ((UNGATED_KEPT,) if s.ungated and kept else ())
            + tuple(f"{KEEP_EXPANSION}, {off} off" for off in (s.passes_off if kept else ()))
            + ((LANGGRAPH,) if s.langgraph and synthesis_mode(app) == "compact" else ())
            + tuple(s.baselines)
        )
        systems = Systems(app, {}, "library", names)
        for size, distractors in s.sizes.items():
            queries = GOLD_SETS[s.data](max(s.n_alone, s.n_load), distractors, s.seed)
            for system in names:  # warm-up (not measured): first-call compilation, caches
                await systems.one(system, queries[0])
            out["runs"][f"{name}/{size}"] = await compare(
                systems,
                queries,
                s.n_alone,
                s.n_load,
                s.fractions,
                s.seed + s.trial,
                f"{name}/{size}",
                progress,
                s.rates,
            )
    if s.same_mode and "advanced_rag" in s.apps:
        systems = Systems(apps["advanced_rag"], {"synthesis": {"mode": s.same_mode}}, "teola")
        queries = GOLD_SETS[s.data](max(s.n_alone, s.n_load), min(s.sizes.values(), default=2), s.seed)
        out["runs"][f"advanced_rag/small/{s.same_mode}"] = await compare(
            systems,
            queries,
            s.n_alone,
            s.n_load,
            s.same_mode_fractions,
            s.seed + s.trial,
            f"advanced_rag/{s.same_mode}",
            progress,
        )
    return out
