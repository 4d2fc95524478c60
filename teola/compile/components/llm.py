"""A generic LLM call over named prompt parts.

config["parts"]: [[name, source], ...] in prompt order; a source is literal text, "$query.<field>"
for a query field, or "$<port>" for an upstream port ("$text", "$context", "$results").
"""

from __future__ import annotations

from teola.compile.components.context import BuildContext
from teola.compile.components.llm_primitives import gen_args, llm_call
from teola.ir.refs import Ref


def decompose_llm(ctx: BuildContext) -> None:
    parts = prompt_parts(ctx, ctx.config.get("parts") or [["question", "$query.question"]])
    split = ctx.config.get("split")
    if split not in (None, "list", "jsonl"):
        raise ValueError(f"node {ctx.node.name!r}: config 'split' must be 'list' or 'jsonl', got {split!r}")
    n_items = ctx.int_config("num_items", 4) if split else 0
    _, decode, port = llm_call(
        ctx,
        "call",
        parts,
        "items" if split else "text",
        gen_args(ctx.config, f"node {ctx.node.name!r}"),
        split=split,
        n_items=n_items,
    )
    if split:
        decode.args["splittable"] = ctx.node.anno == "splittable"
        ctx.sub.exports["items"] = port
        ctx.sub.exports["queries"] = port
    else:
        ctx.sub.exports["text"] = port


def prompt_parts(ctx: BuildContext, raw: list) -> list[tuple[str, str | Ref]]:
    """A node's config "parts" ([[name, source], ...]) as (name, literal text or Ref) pairs."""
    parts = []
    for item in raw:
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(x, str) for x in item)):
            raise ValueError(
                f"node {ctx.node.name!r}: each config 'parts' entry must be [name, source], got {item!r}"
            )
        parts.append((item[0], part_source(ctx, item[1])))
    return parts


def part_source(ctx: BuildContext, src: str) -> str | Ref:
    """A prompt part's source: literal text, or a Ref to a query field or an upstream port."""
    if not src.startswith("$"):
        return src
    name = src[1:]
    if name.startswith("query."):
        field = name.split(".", 1)[1]
        if field not in ctx.query:
            raise ValueError(
                f"node {ctx.node.name!r}: prompt part refers to query[{field!r}], which the query lacks"
            )
        return Ref(name)
    port = ctx.find(name)
    if name in ("context", "results"):
        return Ref(port.key, join="\n\n")
    return Ref(port.key)
