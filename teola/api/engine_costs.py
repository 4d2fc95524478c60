"""The costs a started engine reports (an LLM's `EngineProfile.costs`, another engine's
`EngineProfile.op_costs`: a named profile's, or fitted at start) handed to compilation: each engine
spec takes its first instance's, so passes that add requests or streams gate them on the costs of
the engine the call goes to."""

from __future__ import annotations

from engines.llm_text.costs import EngineCosts
from engines.machine.op_costs import OpCost
from engines.requests import PrimOp
from teola.ir.engine_spec import Engine
from teola.runtime import Runtime


def adopt_engine_costs(engines: dict[str, Engine], runtime: Runtime) -> bool:
    """Set each spec's `costs` and `op_costs` from its started instances (None and {} where they
    report none); True when any changed (optimized graphs cached before then were gated on other
    costs)."""
    changed = False
    for name, spec in engines.items():
        instances = runtime.instances.get(name) or []
        costs = EngineCosts.from_dict(instances[0].profile.costs) if instances else None
        reported = instances[0].profile.op_costs if instances else {}
        op_costs = {PrimOp(op): OpCost.from_dict(c) for op, c in reported.items()}
        if costs != spec.costs or op_costs != spec.op_costs:
            spec.costs, spec.op_costs = costs, op_costs
            changed = True
    return changed
