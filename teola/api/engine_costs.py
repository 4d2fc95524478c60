"""The costs a started LLM engine reports (`EngineProfile.costs`: a named profile's, or fitted at
start) handed to compilation: each engine spec takes its first instance's, so passes that add
requests or streams gate them on the costs of the engine the call goes to."""

from __future__ import annotations

from engines.llm_text.costs import EngineCosts
from teola.ir.engine_spec import Engine
from teola.runtime import Runtime


def adopt_engine_costs(engines: dict[str, Engine], runtime: Runtime) -> bool:
    """Set each spec's `costs` from its started instances (None where they report none); True when
    any changed (optimized graphs cached before then were gated on other costs)."""
    changed = False
    for name, spec in engines.items():
        instances = runtime.instances.get(name) or []
        costs = EngineCosts.from_dict(instances[0].profile.costs) if instances else None
        if costs != spec.costs:
            spec.costs = costs
            changed = True
    return changed
