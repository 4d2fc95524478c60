"""Pass 2, stage decomposition: a batchable primitive with more requests than its engine's
maximum efficient batch becomes micro-batch stages that pipeline with downstream batchable
primitives; an Aggregate joins the stages where a reader needs the whole list."""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Le

from teola.ir.graph import Graph
from teola.passes.result import PassResult
from teola.passes.split_map import ranges, split_primitive

DEFAULT_MAX_EFFICIENT_BATCH = 16


def stage_decomposition(
    graph: Graph, batch_size: Annotated[int, Ge(1), Le(100_000)] | None = None
) -> PassResult:
    """batch_size overrides the engines' max efficient batch (for experiments)."""
    g = graph.copy()
    modified = False
    for p in g.primitives:
        if p.id not in g.nx or not p.args.get("batchable") or "map" not in p.args:
            continue
        limit = batch_size or _limit(g, p.engine)
        if p.num_requests <= limit:
            continue
        a, b = p.args.get("slice", (0, p.num_requests))
        split_primitive(g, p, ranges(a, b, limit))
        modified = True
    return PassResult(g, modified)


def _limit(g: Graph, engine: str | None) -> int:
    info = g.engines.get(engine) if engine else None
    return info.max_efficient_batch if info else DEFAULT_MAX_EFFICIENT_BATCH
