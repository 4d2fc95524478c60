"""Tool calls: one TOOL request per upstream item (JSON {"tool": ..., "args": {...}}).

config: "tools" (the names the node may call; default none). A query's `tools` picks a subset of
the app's (an empty list: no tools), never adds one (teola.compile.components.narrowing)."""

from __future__ import annotations

from teola.compile.components.context import BuildContext, Port
from teola.compile.components.narrowing import narrowed_tools
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive


def decompose_tool(ctx: BuildContext) -> None:
    calls = ctx.find("items", "queries")
    p = ctx.add(
        Primitive(
            PrimOp.TOOL,
            ctx.engine(),
            ctx.node.name,
            inputs=(calls.key,),
            outputs=(ctx.key("results"),),
            args={"map": (calls.key,), "allowed": narrowed_tools(ctx)},
            num_requests=calls.n,
            label="call",
        )
    )
    ctx.sub.exports.update(results=Port(p.outputs[0], calls.n), context=Port(p.outputs[0], calls.n))
