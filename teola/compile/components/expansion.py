"""Query expansion: one LLM call that writes N search queries (splittable: one item per query)."""

from __future__ import annotations

import teola.compile.components.prompts as prompts
from teola.compile.components.context import BuildContext
from teola.compile.components.llm_primitives import gen_args, llm_call
from teola.ir.refs import Ref


def decompose_query_expansion(ctx: BuildContext) -> None:
    n = ctx.int_config("num_queries", 3, maximum=64)
    system = ctx.config.get("instruction", prompts.EXPANSION_SYSTEM)
    task = ctx.config.get("task", prompts.EXPANSION)
    if not isinstance(task, str):
        raise ValueError(f"node {ctx.node.name!r}: config 'task' must be a text, got {type(task).__name__}")
    # user text is data: only the literal "{n}" is filled in (never str.format, whose fields can
    # read attributes of its arguments)
    task = task.replace("{n}", str(n))
    parts = [
        ("instruction", system),
        ("label", "Question:"),
        ("question", Ref(ctx.question())),
        ("task", task),
    ]
    _, decode, port = llm_call(
        ctx,
        "expand",
        parts,
        "queries",
        gen_args(ctx.config, f"node {ctx.node.name!r}", max_tokens=24 * n),
        split="list",
        n_items=n,
    )
    decode.args["splittable"] = ctx.node.anno == "splittable"
    ctx.sub.exports["queries"] = port
