"""Control components: condition (branch) and aggregate."""

from __future__ import annotations

from teola.compile.components.context import BuildContext, Port
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive

PREDICATES = ("contains", "not_contains", "equals")
AGG_MODES = ("first", "concat", "join")


def decompose_condition(ctx: BuildContext) -> None:
    """Evaluate a predicate over the upstream text; the components after it run only when it holds
    (the rest of the graph sees them as skipped)."""
    src = ctx.find("text")
    preds = [p for p in PREDICATES if p in ctx.config]
    if len(preds) != 1:
        raise ValueError(
            f"node {ctx.node.name!r}: a condition needs exactly one of {PREDICATES} in config, "
            f"e.g. {{'contains': 'SEARCH: YES'}}"
        )
    p = ctx.add(
        Primitive(
            PrimOp.CONDITION,
            None,
            ctx.node.name,
            inputs=(src.key,),
            outputs=(ctx.key("branch"),),
            args={
                "predicate": preds[0],
                "value": str(ctx.config[preds[0]]),
                "case_sensitive": bool(ctx.config.get("case_sensitive", False)),
            },
            label="test",
        )
    )
    ctx.sub.exports["branch"] = Port(p.outputs[0])


def decompose_aggregate(ctx: BuildContext, parent_exports: list[dict[str, Port]]) -> None:
    """Combine the direct upstream components' outputs: `first` (first that ran, in upstream order:
    the merge point after a condition), `concat` (lists), `join` (texts)."""
    mode = ctx.config.get("mode", "first")
    if mode not in AGG_MODES:
        raise ValueError(f"node {ctx.node.name!r}: aggregate mode {mode!r} unknown; use one of {AGG_MODES}")
    keys = []
    for exports in parent_exports:
        port = exports.get("text") or exports.get("context") or exports.get("results")
        if port is None:
            raise ValueError(f"node {ctx.node.name!r}: an upstream node exports nothing to aggregate")
        keys.append(port.key)
    if not keys:
        raise ValueError(f"node {ctx.node.name!r}: an aggregate needs at least one upstream node")
    p = ctx.add(
        Primitive(
            PrimOp.AGGREGATE,
            None,
            ctx.node.name,
            inputs=tuple(keys),
            outputs=(ctx.key("text"),),
            args={"mode": mode},
            label="merge",
        )
    )
    ctx.sub.exports["text"] = Port(p.outputs[0])
