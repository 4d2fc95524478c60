"""Runs the enabled passes in order until none changes the graph (bounded fixed point)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from teola.ir.graph import Graph
from teola.passes.option_errors import describe_errors
from teola.passes.options import option_names, pass_options_model
from teola.passes.registry import enabled_by_default, get_pass, pass_names

MAX_ROUNDS = 4


class PassError(RuntimeError):
    """A pass raised or broke the graph; the message names it and the passes that ran before."""


class PassOptionError(ValueError):
    """A query gave a pass options it does not take, or values it rejects (the client's mistake)."""


def check_options(name: str, options: dict[str, Any]) -> None:
    """Raise PassOptionError naming config.passes.<name>.<option> for options the pass's function
    does not declare or values its annotations reject (`teola.passes.options`)."""
    model = pass_options_model(name)
    if model is None:
        return
    try:
        model.model_validate(options)
    except ValidationError as exc:
        known = option_names(name)
        raise PassOptionError(
            f"{describe_errors(exc, f'config.passes.{name}')}; "
            f"options: {', '.join(known) or 'none (use true or false)'}"
        ) from None


def enabled_passes(passes_config: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """Which passes run, with their options, from a query's `config["passes"]`:
    {name: bool | {option: value}}. Unknown names raise ValueError."""
    cfg = passes_config or {}
    if not isinstance(cfg, dict):
        raise TypeError(f"config['passes'] must be a dict of pass name -> bool or options, got {cfg!r}")
    names = pass_names()
    for k in cfg:
        if k not in names:
            raise ValueError(f"unknown pass {k!r} in config['passes']; passes: {', '.join(names)}")
    out = []
    for name in names:
        v = cfg.get(name, enabled_by_default(name))
        if v is False:
            continue
        if v is not True and not isinstance(v, dict):
            raise TypeError(f"config['passes'][{name!r}] must be true, false or a dict of options, got {v!r}")
        options = v if isinstance(v, dict) else {}
        check_options(name, options)
        out.append((name, options))
    return out


def run_pipeline(
    graph: Graph, passes_config: dict[str, Any] | None = None, lint: bool = False
) -> tuple[Graph, list[str]]:
    """Apply the passes; returns the optimized graph and the names of the passes that changed it.
    With lint=True the graph is checked after every pass."""
    steps = enabled_passes(passes_config)
    ran: list[str] = []
    applied: list[str] = []
    for _ in range(MAX_ROUNDS):
        changed = False
        for name, options in steps:
            try:
                result = get_pass(name)(graph, **options)
            except (ValueError, TypeError) as e:  # passes reject bad option values this way
                raise PassOptionError(f"config.passes.{name}: {e}") from e
            except Exception as e:
                raise PassError(f"pass {name!r} failed (after {', '.join(ran) or 'no passes'}): {e}") from e
            if lint:
                try:
                    result.graph.lint()
                except Exception as e:
                    raise PassError(
                        f"pass {name!r} broke the graph (after {', '.join(ran) or 'no passes'}): {e}"
                    ) from e
            ran.append(name)
            graph = result.graph
            if result.modified:
                changed = True
                applied.append(name)
        if not changed:
            return graph, applied
    raise PassError(f"passes did not reach a fixed point in {MAX_ROUNDS} rounds (ran {', '.join(ran)})")
