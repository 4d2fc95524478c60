"""SIMULATED: Teola's Fig. 8 document-QA rows at the paper's set-up, as far as the simulator allows,
with the mechanism analysis (bench/results/sim/sim_teola_paper.md).

    python -m bench sim_paper --fig8 [--queries 200] [--quick]

The paper's set-up (section 7, ../shared/papers/teola.md) and what is used here:
- core LLM Llama-2-7B / 13B (1 / 2 RTX 3090s per instance) or Llama-30B (2 A800s): the A100 profiles
  `a100-llama2-7b-measured` (built from measured A100 operators) and `a100-llama2-13b` (derived); no
  30B profile exists and no 3090 LLM profile, so the LLM runs at A100 speed.
- two instances of the LLM, one of every other engine (section 7.1).
- advanced RAG: 3 expanded queries, top-16 search per query, a cross-encoder reranker keeping the top 3,
  refine-mode synthesis (3 chained LLM calls); naive RAG: top 3, tree mode; chunks of 256 tokens,
  overlap 30. Documents: NarrativeQA stories, ~100 chunks per query (bench/studies/sim/sim_paper.py's
  "large"), and for one variant TruthfulQA questions over 10 passages, 11-13 chunks (the paper's data set; the
  size of its documents is not stated), where teola's default pass prune_covered_searches drops the expansion.
- bge-large-en-v1.5 and bge-reranker-large on one RTX 3090 each: the profiles' non-LLM engines are
  BERT-base-sized on an A100. Variant "paper-non-llm" re-derives their per-token cost with the profile's
  own formula (2 x parameters FLOPs per token at 30% MFU) for the paper's models and GPU: 335M and 560M
  parameters at 71 TFLOPS (the 3090's dense FP16 tensor rate with FP32 accumulation).

Systems: teola with its defaults; teola with the expansion kept ("teola-equal-work": pass
prune_covered_searches off, so it does the baselines' work); the four LlamaDist baselines
(bench/studies/rag/rag_setup.py). Ablations on teola-equal-work: each of the paper's mechanisms off
(parallelization, pipelining, topology-aware batching) and all three off. Where the time goes: per engine,
mean queued and running seconds per query and busy fraction under load; per component (expansion, indexing,
...) the seconds a query alone spends executing and queued in it.
"""

from __future__ import annotations

import copy
import statistics
import sys
from typing import Any

from bench.lib.workloads import app_query, doc_qa_queries, narrative_qa_queries
from bench.studies.rag.rag_setup import ABLATIONS, SYSTEMS
from bench.studies.sim.sim_paper import CROSS_ENCODER, LARGE_DISTRACTORS

PAPER = {"advanced_rag": {"low": 2.09, "high": 1.68}, "naive_rag": {"low": 1.62, "high": 1.46}}
INSTANCES = {"llm": 2, "embedding": 1, "reranker": 1, "vectordb": 1}
FRACTIONS = (0.1, 0.5, 0.9)  # of teola-equal-work's simulated capacity; the paper's "low" and "high" ends
EQUAL_WORK = {"passes": {"prune_covered_searches": False}}
BASELINES = tuple(k for k in SYSTEMS if k != "teola")
# the paper's non-LLM engines on an RTX 3090, with the derived profiles' formula (30% MFU, 3 ms per batch)
RTX3090_FLOPS = 71e12
PAPER_NON_LLM = {"sentence_transformers": ("embedding", 335e6), "reranker": ("reranking", 560e6)}


def system_configs() -> dict[str, tuple[dict[str, Any], str]]:
    return {
        "teola": SYSTEMS["teola"],
        "teola-equal-work": (EQUAL_WORK, "topology"),
        **{k: SYSTEMS[k] for k in BASELINES},
    }


def ablation_configs() -> dict[str, tuple[dict[str, Any], str]]:
    """teola-equal-work with each mechanism off, and with all three off."""
    out: dict[str, tuple[dict[str, Any], str]] = {"teola-equal-work": (EQUAL_WORK, "topology")}
    every: dict[str, bool] = {}
    for name, (config, policy) in ABLATIONS.items():
        out[name] = ({"passes": {**EQUAL_WORK["passes"], **config.get("passes", {})}}, policy)
        every |= config.get("passes", {})
    out["none-of-the-three"] = ({"passes": {**EQUAL_WORK["passes"], **every}}, "fifo")
    return out


def paper_non_llm(profile: str) -> dict[str, Any]:
    """`profile` with the embedder and reranker re-derived for bge-large-en-v1.5 / bge-reranker-large
    on an RTX 3090 (the Teola paper's), by the formula the derived profiles state."""
    from engines.sim.profile import load_profile

    data = copy.deepcopy(load_profile(profile))
    for kind, (op, params) in PAPER_NON_LLM.items():
        data["engines"][kind]["op_cost"][op]["per_token"] = 2 * params / (0.30 * RTX3090_FLOPS)
    data["name"] = f"{data.get('name', profile)}+paper-non-llm"
    data["source"] = (
        f"{data.get('source', '')} Variant (bench/studies/sim/sim_paper_fig8.py): embedder and reranker "
        "per-token cost derived for bge-large-en-v1.5 (335M) and bge-reranker-large (560M) on an RTX 3090 "
        "(71 TFLOPS dense FP16 with FP32 accumulation) at 30% MFU."
    )
    return data


VARIANTS = (  # (name, core LLM, profile, non-LLM engines, documents, apps)
    ("7B", "Llama-2-7B", "a100-llama2-7b-measured", "profile", "large", ("advanced_rag", "naive_rag")),
    (
        "7B+paper-non-llm",
        "Llama-2-7B",
        "a100-llama2-7b-measured",
        "paper",
        "large",
        ("advanced_rag", "naive_rag"),
    ),
    (
        "7B+paper-non-llm, TruthfulQA",
        "Llama-2-7B",
        "a100-llama2-7b-measured",
        "paper",
        "small",
        ("advanced_rag",),
    ),
    ("13B", "Llama-2-13B", "a100-llama2-13b", "profile", "large", ("advanced_rag",)),
    ("13B+paper-non-llm", "Llama-2-13B", "a100-llama2-13b", "paper", "large", ("advanced_rag",)),
)
DOCS = {
    "large": "NarrativeQA questions over the gold story and 28 others (~100 chunks)",
    "small": "TruthfulQA questions over 10 passages (11-13 chunks: top-16 search covers them all, so "
    "teola's default pass prune_covered_searches drops the expansion)",
}


def build(name: str) -> Any:
    import importlib

    module = importlib.import_module(f"apps.{name}")
    if name != "advanced_rag":
        return module.build()
    app = module.build(reranker=CROSS_ENCODER)
    return module.set_template(app, mode="refine")


def queries(n: int, docs: str) -> list[dict[str, Any]]:
    if docs == "large":
        qs = [app_query(q) for q in narrative_qa_queries(min(n, 400), LARGE_DISTRACTORS, 0)]
    else:
        qs = [app_query(q) for q in doc_qa_queries(min(n, 400), 10, "truthfulqa", 0)]
    return [qs[i % len(qs)] | {"question": f"{qs[i % len(qs)]['question']} (user {i})"} for i in range(n)]


def run(app: str, profile: Any, rate: float, n: int, system: tuple[dict, str], docs: str) -> dict[str, Any]:
    from teola.sim.run import simulate

    config, policy = system
    built = build(app)
    report = simulate(
        built, profile, rate, queries(n, docs), _instances(built), {**config, "policy": policy}, 0
    )
    s = report.summary()
    return {
        **{k: s[k] for k in ("queries", "failed", "mean_s", "p50_s", "p99_s", "throughput_qps")},
        "busy": {k: round(v, 3) for k, (v, _) in report.per_engine().items()},
        "per_query": {k: [round(q, 4), round(r, 4)] for k, (q, r) in report.mean_breakdown().items()},
    }


def _instances(app: Any) -> dict[str, int]:
    return {k: v for k, v in INSTANCES.items() if k in app.engines}


def stages_alone(
    app_name: str, profile: Any, system: tuple[dict, str], docs: str, n: int = 3
) -> dict[str, Any]:
    """One query at a time: per component, mean seconds executing and queued (union over its
    primitives), and the mean latency."""
    from bench.studies.rag.rag_analysis import union_seconds
    from teola.sim.run import use_profile
    from teola.sim.virtual_loop import run_virtual

    app = build(app_name)
    use_profile(app, profile, _instances(app))
    config, policy = system

    async def go() -> list[Any]:
        await app.start()
        try:
            return [await app.run(q, {**config, "policy": policy}) for q in queries(n, docs)]
        finally:
            await app.stop()

    acc: dict[str, list[float]] = {}
    latencies = []
    for result in run_virtual(go()):
        trace = [
            t
            for t in result.trace
            if t.get("engine")
            and t.get("started") is not None
            and t.get("finished") is not None
            and not t.get("fused_into")
        ]
        latencies.append(max(t["finished"] for t in trace) - min(t["queued"] for t in trace))
        for comp in sorted({t["primitive"].split(".")[0] for t in trace}):
            mine = [t for t in trace if t["primitive"].split(".")[0] == comp]
            e = union_seconds([(t["started"], t["finished"]) for t in mine])
            q = union_seconds([(t["queued"], t["started"]) for t in mine])
            a = acc.setdefault(comp, [0.0, 0.0])
            acc[comp] = [a[0] + e / n, a[1] + q / n]
    return {
        "latency_s": statistics.fmean(latencies),
        "components": {k: [round(v[0], 4), round(v[1], 4)] for k, v in acc.items()},
    }


def _capacity(app: str, profile: Any, n: int, docs: str) -> float:
    return run(app, profile, 1000.0, n, (EQUAL_WORK, "topology"), docs)["throughput_qps"]


def variant(
    name: str,
    llm: str,
    profile_name: str,
    non_llm: str,
    docs: str,
    apps: tuple[str, ...],
    n: int,
    fractions: tuple[float, ...],
    ablate: bool,
) -> dict[str, Any]:
    profile: Any = paper_non_llm(profile_name) if non_llm == "paper" else profile_name
    out: dict[str, Any] = {
        "name": name,
        "llm": llm,
        "profile": profile_name,
        "non_llm": non_llm,
        "docs": docs,
        "apps": {},
    }
    for app in apps:
        cap = _capacity(app, profile, n, docs)
        systems = system_configs()
        rows = []
        for f in fractions:
            for sname, system in systems.items():
                s = run(app, profile, f * cap, n, system, docs)
                rows.append({"fraction": f, "rate": f * cap, "system": sname, **s})
                print(
                    f"[fig8] {name} {app} {f:.2f}x {sname}: mean {s['mean_s']:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
        entry: dict[str, Any] = {"capacity_qps": cap, "rows": rows, "speedups": speedups(rows)}
        best = {r["fraction"]: r["best"] for r in entry["speedups"]}
        entry["alone"] = {
            s: stages_alone(app, profile, systems[s], docs)
            for s in ("teola", "teola-equal-work", best[fractions[0]])
        }
        if ablate and app == "advanced_rag":
            arows = []
            for load, rate, k in (
                ("alone", cap / n / 50, min(n, 20)),
                (f"{fractions[-1]:.1f}x capacity", fractions[-1] * cap, n),
            ):
                for vname, system in ablation_configs().items():
                    s = run(app, profile, rate, k, system, docs)
                    arows.append({"load": load, "variant": vname, **s})
            entry["ablations"] = arows
        out["apps"][app] = entry
    return out


def speedups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per load: the best baseline (lowest mean) and teola's and teola-equal-work's speed-up over it."""
    out = []
    for f in sorted({r["fraction"] for r in rows}):
        at = {r["system"]: r for r in rows if r["fraction"] == f}
        best = min(BASELINES, key=lambda k: at[k]["mean_s"])
        out.append(
            {
                "fraction": f,
                "best": best,
                "best_mean_s": at[best]["mean_s"],
                "teola": at[best]["mean_s"] / at["teola"]["mean_s"],
                "teola-equal-work": at[best]["mean_s"] / at["teola-equal-work"]["mean_s"],
            }
        )
    return out


def study(n: int, quick: bool) -> dict[str, Any]:
    variants = VARIANTS[:1] if quick else VARIANTS
    fractions = (0.1, 0.9) if quick else FRACTIONS
    return {
        "queries": n,
        "instances": INSTANCES,
        "fractions": fractions,
        "paper": PAPER,
        "docs": DOCS,
        "variants": [
            variant(name, llm, prof, non_llm, docs, apps[:1] if quick else apps, n, fractions, not quick)
            for name, llm, prof, non_llm, docs, apps in variants
        ],
    }


def slim(data: dict[str, Any]) -> dict[str, Any]:
    """The results to keep (under 200 KB): per-engine busy and per-query times only at the highest load,
    where the page reads them."""
    out = copy.deepcopy(data)
    for v in out["variants"]:
        for entry in v["apps"].values():
            top = max(r["fraction"] for r in entry["rows"])
            for r in entry["rows"]:
                if r["fraction"] != top:
                    r.pop("busy", None)
                    r.pop("per_query", None)
    return out
