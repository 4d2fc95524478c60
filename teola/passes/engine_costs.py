"""The costs a cost-gated pass predicts with: a profile named in the pass's options, else what
the engine the call goes to reported when it started (`EngineInfo.costs` for an LLM engine,
`EngineInfo.op_costs` per op for the others: fitted at start or its own named profile;
engines.llm_text.costs, engines.machine.op_costs), else none (each pass says what it does without).

A fit whose error is over MAX_FIT_ERROR is not trusted (a probe taken while other work held the
cores gave 0 ms per prompt token at 15% error): a gate given such costs keeps the graph as it is
and says why in its `# gate` line, rather than predicting with them or acting as if none were known."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from engines.llm_text import costs as llm_costs
from engines.llm_text.costs import FITTED, EngineCosts
from engines.machine.op_costs import OpCost, profile_op_table
from teola.ir.graph import Graph
from teola.ir.ops import PrimOp

MAX_FIT_ERROR = 0.10  # mean relative error of a start-up fit beyond which its costs are not used


@functools.cache
def profile_costs(profile: str) -> EngineCosts:
    """The `vllm` costs of a shipped profile (by name) or a profile file (by path)."""
    return llm_costs.profile_costs(profile)


@functools.cache
def profile_op_cost(profile: str, kind: str, op: PrimOp) -> tuple[float, float] | None:
    """(base, per_item) seconds of `op` on an engine of `kind` in a profile (its `op_cost` table),
    None where the profile has none."""
    path = Path(profile) if Path(profile).is_file() else llm_costs.PROFILE_DIR / f"{profile}.json"
    try:
        cost = json.loads(path.read_text(encoding="utf-8"))["engines"][kind]["op_cost"][op.value]
        return float(cost["base"]), float(cost["per_item"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def costs_for(graph: Graph, engine: str | None, profile: str | None) -> EngineCosts | None:
    if profile:
        return profile_costs(profile)
    info = graph.engines.get(engine or "")
    return info.costs if info is not None else None


def op_cost_for(graph: Graph, engine: str | None, op: PrimOp, profile: str | None) -> OpCost | None:
    """The costs of `op` on a non-LLM engine: the `op_cost` table of a profile named in the pass's
    options for the engine's kind, else what the engine reported at start, else None."""
    info = graph.engines.get(engine or "")
    if info is None:
        return None
    named = _profile_op_table(profile, info.kind).get(op.value) if profile else None
    return named if named is not None else info.op_costs.get(op)


@functools.cache
def _profile_op_table(profile: str, kind: str) -> dict[str, OpCost]:
    return profile_op_table(profile, kind)


def unreliable(costs: EngineCosts | OpCost) -> bool:
    """A start-up fit too poor to predict with."""
    return costs.source == FITTED and costs.error > MAX_FIT_ERROR


def record(
    graph: Graph, pass_name: str, name: str, decision: str, gain_s: float, costs: EngineCosts, note: str = ""
) -> None:
    """Write a gate's decision and predicted gain into the graph (its text shows it)."""
    extra = f"; {note}" if note else ""
    graph.gates[f"{pass_name} {name}"] = (
        f"{decision}, predicted gain {gain_s * 1e3:+.0f} ms ({costs.source}){extra}"
    )


def record_unreliable(graph: Graph, pass_name: str, name: str, costs: EngineCosts) -> None:
    graph.gates[f"{pass_name} {name}"] = (
        f"kept whole, costs not used ({costs.source}, fit error {costs.error:.0%} over {MAX_FIT_ERROR:.0%})"
    )
