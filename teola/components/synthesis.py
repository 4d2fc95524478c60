"""LLM synthesis over retrieved context in `compact`, `refine` or `tree` mode."""
from __future__ import annotations

from teola.components import prompts
from teola.components.context import BuildContext, Port
from teola.components.llm_primitives import gen_args, llm_call
from teola.refs import Ref

MODES = ("compact", "refine", "tree")


def decompose_synthesis(ctx: BuildContext) -> None:
    mode = ctx.config.get("mode", "refine")
    if mode not in MODES:
        raise ValueError(f"node {ctx.node.name!r}: synthesis mode {mode!r} unknown; use one of {MODES}")
    context = ctx.find("context")
    question = Ref(ctx.question())
    gen = gen_args(ctx.config)
    qa = ctx.config.get("instruction", prompts.QA)
    n = max(1, context.n)
    if mode == "compact":
        parts = [("instruction", qa), ("question", question), ("context", Ref(context.key, join="\n\n"))]
        _, _, port = llm_call(ctx, "call0", parts, "answer", gen)
    elif mode == "refine":
        refine = ctx.config.get("refine_instruction", prompts.REFINE)
        port = None
        for i in range(n):
            parts = [("instruction", qa if i == 0 else refine), ("question", question),
                     ("context", Ref(context.key, index=i))]
            if port is not None:
                parts.append(("existing_answer", Ref(port.key)))
            _, _, port = llm_call(ctx, f"call{i}", parts, f"answer{i}" if i < n - 1 else "answer", gen)
    else:
        port = _tree(ctx, context, question, gen, qa, n)
    ctx.sub.exports["text"] = port


def _tree(ctx: BuildContext, context: Port, question: Ref, gen: dict, qa: str, n: int) -> Port:
    """Leaves answer from one chunk each; levels of `fan_in` answers merge until one is left."""
    fan_in = ctx.int_config("fan_in", 3, minimum=2)
    merge = ctx.config.get("merge_instruction", prompts.TREE_MERGE)
    level = []
    for i in range(n):
        parts = [("instruction", qa), ("question", question), ("context", Ref(context.key, index=i))]
        level.append(llm_call(ctx, f"leaf{i}", parts, f"leaf{i}", gen)[2])
    depth = 0
    while len(level) > 1:
        depth += 1
        nxt = []
        for j in range(0, len(level), fan_in):
            group = level[j:j + fan_in]
            parts = [("instruction", merge), ("question", question)]
            parts += [(f"candidate{k}", Ref(p.key)) for k, p in enumerate(group)]
            nxt.append(llm_call(ctx, f"merge{depth}_{j // fan_in}", parts, f"merge{depth}_{j // fan_in}", gen)[2])
        level = nxt
    return level[0]
