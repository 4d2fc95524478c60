"""The LLM costs a cost-gated pass predicts with: a profile named in the pass's options, else what
the engine the call goes to reported when it started (`EngineInfo.costs`: fitted at start or its own
named profile; engines.llm_text.costs), else none (each pass says what it does without)."""
from __future__ import annotations

import functools

from engines.llm_text import costs as llm_costs
from engines.llm_text.costs import EngineCosts
from teola.ir.graph import Graph


@functools.cache
def profile_costs(profile: str) -> EngineCosts:
    """The `vllm` costs of a shipped profile (by name) or a profile file (by path)."""
    return llm_costs.profile_costs(profile)


def costs_for(graph: Graph, engine: str | None, profile: str | None) -> EngineCosts | None:
    if profile:
        return profile_costs(profile)
    info = graph.engines.get(engine or "")
    return info.costs if info is not None else None


def record(graph: Graph, pass_name: str, name: str, decision: str, gain_s: float, costs: EngineCosts) -> None:
    """Write a gate's decision and predicted gain into the graph (its text shows it)."""
    graph.gates[f"{pass_name} {name}"] = f"{decision}, predicted gain {gain_s * 1e3:+.0f} ms ({costs.source})"
