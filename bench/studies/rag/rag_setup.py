"""The end-to-end RAG study's systems, ablations, rates and settings, and the apps it builds on the shared
engines (bench.studies.rag.rag runs them; other studies take the same systems and apps from here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from teola.passes.registry import enabled_by_default, pass_names

# every optimization pass that runs by default, off (speculative_search included: before it was, the
# baselines searched while the judge decoded, as teola does); the passes come from the registry so a
# new default pass is off in the baselines too
NO_OPT = {name: False for name in pass_names() if enabled_by_default(name)}
SYSTEMS: dict[str, tuple[dict[str, Any], str]] = {
    "teola": ({}, "topology"),
    "LlamaDist-PO": ({"passes": {**NO_OPT, "module_chain": True}}, "po"),
    "LlamaDist-TO": ({"passes": {**NO_OPT, "module_chain": True}}, "to"),
    "LlamaDistPC-PO": ({"passes": dict(NO_OPT)}, "po"),
    "LlamaDistPC-TO": ({"passes": dict(NO_OPT)}, "to"),
}
# the Teola paper's baselines alone (what other suites add beside teola: bench.doc_qa, bench.remote_apps)
PAPER_BASELINES = tuple(k for k in SYSTEMS if k != "teola")
ABLATIONS: dict[str, tuple[dict[str, Any], str]] = {
    "no-parallelization": ({"passes": {"prune_dependencies": False, "prefill_split": False}}, "topology"),
    "no-pipelining": ({"passes": {"stage_decomposition": False, "decode_pipelining": False}}, "topology"),
    "no-topology-batching": ({}, "fifo"),
}
# Queries per second. Alone, a naive-RAG query takes ~5-7 s and an advanced-RAG query ~7-20 s on the
# 2-core machine (LLM decodes dominate); "low" leaves queries mostly alone, "high" overlaps several.
RATES = {"naive_rag": {"low": 0.1, "high": 0.3}, "advanced_rag": {"low": 0.07, "high": 0.15}}
# MiniLM on this CPU: ~9 chunks/s at batch 1, ~14 at batch 4, no gain beyond (measured with 64
# BoolQ passages); the pre-tuned batch the paper's TO baseline uses and stage decomposition splits at.
BENCH_TUNING = {"embedding": {"max_efficient_batch": 4}}
# engine switches a suite sets for a whole run (bench.doc_qa's remote LLM), on top of BENCH_TUNING
ENGINE_OVERRIDES: dict[str, dict[str, Any]] = {}
QUERY_TIMEOUT = 300.0
# The real LlamaIndex library on the same engine adapters (bench/baselines/llamaindex_rag.py; optional extra).
LLAMAINDEX = "LlamaIndex"
ALL_SYSTEMS = (*SYSTEMS, LLAMAINDEX)


@dataclass
class Settings:
    apps: tuple[str, ...] = ("naive_rag", "advanced_rag")
    systems: tuple[str, ...] = ALL_SYSTEMS
    rates: tuple[str, ...] = ("low", "high")
    # 2 trials x (2 low + 3 high) queries x 6 systems: ~23-25 min of runs on the 2-core machine
    # (estimated from the per-trace times of earlier runs), leaving room under 30 min.
    n_queries: dict[str, int] = field(default_factory=lambda: {"low": 2, "high": 3})
    trials: int = 2  # each (app, rate, system) trace, with seeds seed, seed+1, ...
    passages: int = 10
    source: str = "truthfulqa"
    seed: int = 0
    ablations: tuple[str, ...] = tuple(ABLATIONS)
    ablation_app: str = "advanced_rag"
    ablation_single: int = 2  # queries run alone per ablation variant
    ablation_load: bool = True  # ablations also under the high rate
    warmup: bool = True
    warmup_configs: int = 2  # warm-up queries per app: teola's config, then LlamaDist's
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # per-node overrides, every system
    budget_s: float = 25 * 60  # later ablation-under-load runs are skipped past this (noted)

    @classmethod
    def quick(cls) -> Settings:
        """Under 5 minutes with engine start-up: one rate, 2 queries, 1 trial, no ablations, and one
        baseline of each kind (chain with PO, parallel modules with TO, LlamaIndex)."""
        return cls(
            systems=("teola", "LlamaDist-PO", "LlamaDistPC-TO", LLAMAINDEX),
            rates=("high",),
            n_queries={"high": 2},
            trials=1,
            ablations=(),
            ablation_load=False,
            warmup_configs=1,
        )


# ---- apps and engines ---------------------------------------------------------------------------
def make_apps(
    names: tuple[str, ...], overrides: dict[str, dict[str, Any]] | None = None, bench_tuning: bool = True
) -> dict[str, Any]:
    """The apps on the default embedded engines, sharing one adapter per engine (one LLM load).
    overrides: more engine options by engine name (e.g. {"llm": {"step_stats": True}});
    bench_tuning=False leaves out this suite's pre-tuned embedder batch (BENCH_TUNING), so the
    engines run with teola's shipped defaults; ENGINE_OVERRIDES applies either way."""
    import importlib

    from teola.api.shared_engines import share_engines

    options = engine_options(bench_tuning, overrides)
    apps = {}
    for name in names:
        module = importlib.import_module(f"apps.{name}")
        app = module.build(**{k: v for k, v in options.items() if k in module.build.__code__.co_varnames})
        apps[name] = app
    share_engines(apps.values())
    return apps


def engine_options(
    bench_tuning: bool = True, overrides: dict[str, dict[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """Engine options by engine name: BENCH_TUNING (unless bench_tuning is false), then
    ENGINE_OVERRIDES, then `overrides`, later layers winning per option."""
    layers = [BENCH_TUNING if bench_tuning else {}, ENGINE_OVERRIDES, overrides or {}]
    return {
        k: {o: v for layer in layers for o, v in layer.get(k, {}).items()}
        for k in {k for layer in layers for k in layer}
    }


def step_counts(app: Any) -> Any:
    """vLLM's engine-step counters of the app's LLM (engines.vllm.step_stats.StepCounts), or None
    (no local vLLM, or one started without step_stats)."""
    insts = (app.runtime.instances if app.runtime else {}).get("llm", [])
    h = getattr(insts[0].handle, "backend", insts[0].handle) if insts else None
    return h.step_counts() if getattr(h, "steps", None) is not None else None


async def reset_prefix_cache(app: Any) -> bool:
    """Empty each LLM instance's prefix cache through its adapter (a local VLLMEngine's
    reset_prefix_cache, which also forgets its sent prefixes; a remote `vllm serve`'s endpoint)."""
    insts = (app.runtime.instances if app.runtime else {}).get("llm", [])
    ok = bool(insts)
    for inst in insts:
        h = getattr(inst.handle, "backend", inst.handle)
        if isinstance(
            getattr(h, "base_url", None), str
        ):  # a remote `vllm serve` (engines.vllm.serve.ServeProcess)
            ok = await _reset_remote(h.base_url) and ok
            continue
        if getattr(h, "_engine", None) is None or not hasattr(h, "reset_prefix_cache"):
            ok = False
            continue
        ok = bool(await h.reset_prefix_cache()) and ok  # VLLMEngine's: also forgets its sent prefixes
    return ok


async def _reset_remote(base_url: str) -> bool:
    """POST /reset_prefix_cache: served by vLLM in development mode (VLLM_SERVER_DEV_MODE=1)."""
    import httpx

    async with httpx.AsyncClient(timeout=60) as client:
        return (await client.post(f"{base_url.rstrip('/')}/reset_prefix_cache")).status_code == 200
