"""Tool calls: one TOOL request per upstream item (JSON {"tool": ..., "args": {...}})."""
from __future__ import annotations

from teola.compile.components.context import BuildContext, Port
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive


def decompose_tool(ctx: BuildContext) -> None:
    calls = ctx.find("items", "queries")
    p = ctx.add(Primitive(PrimOp.TOOL, ctx.engine(), ctx.node.name, inputs=(calls.key,),
                          outputs=(ctx.key("results"),), args={"map": (calls.key,),
                          "allowed": list(ctx.config.get("tools", []))},
                          num_requests=calls.n, label="call"))
    ctx.sub.exports.update(results=Port(p.outputs[0], calls.n), context=Port(p.outputs[0], calls.n))
