"""LLM synthesis over retrieved context, with LlamaIndex's response modes:

- `compact` (default): the chunks packed into as few prompts as fit the model's context window; the
  first pack is answered, each further pack refines the answer (one call when everything fits);
- `refine`: one call per chunk, each refining the previous answer;
- `tree` (tree_summarize): one answer per pack of chunks, then answers merged `fan_in` at a time
  until one is left (one call when everything fits).

Packing is planned at compile time from chunk sizes (`teola.compile.components.packing`); config `pack_size`
fixes the chunks per prompt, `token_ratio` the LLM-tokens-per-counted-token bound. Every call puts
the instruction and the question after its context (`prompts.qa_parts`) and ends with config `ask`
(`prompts.ASK`; null leaves it out).
"""

from __future__ import annotations

import teola.compile.components.prompts as prompts
from teola.compile.components.context import BuildContext, Port
from teola.compile.components.llm_primitives import gen_args, llm_call
from teola.compile.components.packing import TOKEN_RATIO, context_budget, pack_ranges
from teola.ir.refs import Ref

MODES = ("compact", "refine", "tree")


def decompose_synthesis(ctx: BuildContext) -> None:
    mode = ctx.config.get("mode", "compact")
    if mode not in MODES:
        raise ValueError(f"node {ctx.node.name!r}: synthesis mode {mode!r} unknown; use one of {MODES}")
    context = ctx.find("context")
    question = Ref(ctx.question())
    gen = gen_args(ctx.config, f"node {ctx.node.name!r}")
    qa = ctx.config.get("instruction", prompts.QA)
    if mode == "refine":
        packs = [(i, i + 1) for i in range(max(1, context.n))]
    else:
        # compact refines over packs, so a pack leaves room for an existing answer as well
        reserved = gen["max_tokens"] * (2 if mode == "compact" else 1)
        q = str(ctx.query["question"])
        labels = [prompts.CONTEXT_LABEL, prompts.CONTEXT_END, prompts.EXISTING_LABEL, prompts.QUESTION_LABEL]
        packs = _packs(ctx, context, [qa, q, _ask(ctx), *labels], reserved)
    if mode == "tree":
        port = _tree(ctx, context, question, gen, qa, packs)
    else:
        port = _refine(ctx, context, question, gen, qa, packs)
    ctx.sub.exports["text"] = port


def _packs(ctx: BuildContext, context: Port, fixed: list[str], reserved: int) -> list[tuple[int, int]]:
    ratio = ctx.config.get("token_ratio", TOKEN_RATIO)
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not 0.1 <= ratio <= 100:
        raise ValueError(
            f"node {ctx.node.name!r}: config 'token_ratio' must be a number in [0.1, 100], got {ratio!r}"
        )
    pack_size = ctx.int_config("pack_size", 0, minimum=1) if "pack_size" in ctx.config else None
    budget = context_budget(_window(ctx), [t for t in fixed if isinstance(t, str)], reserved, ratio)
    return pack_ranges(context.n, context.item_tokens, budget, ratio, pack_size)


def _chunks(context: Port, pack: tuple[int, int]) -> Ref:
    a, b = pack
    return Ref(context.key, index=a) if b - a == 1 else Ref(context.key, index=a, join="\n\n", stop=b)


def _refine(
    ctx: BuildContext, context: Port, question: Ref, gen: dict, qa: str, packs: list[tuple[int, int]]
) -> Port:
    refine = ctx.config.get("refine_instruction", prompts.REFINE)
    port = None
    last = len(packs) - 1
    ask = _ask(ctx)
    for i, pack in enumerate(packs):
        parts = prompts.qa_parts(
            question,
            _chunks(context, pack),
            qa if i == 0 else refine,
            Ref(port.key) if port is not None else None,
            ask,
        )
        _, _, port = llm_call(ctx, f"call{i}", parts, "answer" if i == last else f"answer{i}", gen)
    return port


def _tree(
    ctx: BuildContext, context: Port, question: Ref, gen: dict, qa: str, packs: list[tuple[int, int]]
) -> Port:
    """Leaves answer from one pack each; levels of `fan_in` answers merge until one is left."""
    ask = _ask(ctx)
    if len(packs) == 1:
        return llm_call(
            ctx, "leaf0", prompts.qa_parts(question, _chunks(context, packs[0]), qa, None, ask), "answer", gen
        )[2]
    merge = ctx.config.get("merge_instruction", prompts.TREE_MERGE)
    fan_in = ctx.int_config(
        "fan_in", _fan_in(ctx, gen["max_tokens"], [merge, ctx.query["question"]]), minimum=2, maximum=64
    )
    level = []
    for i, pack in enumerate(packs):
        parts = prompts.qa_parts(question, _chunks(context, pack), qa, None, ask)
        level.append(llm_call(ctx, f"leaf{i}", parts, f"leaf{i}", gen)[2])
    depth = 0
    while len(level) > 1:
        depth += 1
        nxt = []
        for j in range(0, len(level), fan_in):
            group = level[j : j + fan_in]
            parts: list = [("instruction", merge)]
            parts += [(f"candidate{k}", Ref(p.key)) for k, p in enumerate(group)]
            parts += [("question_label", prompts.QUESTION_LABEL), ("question", question)]
            if ask:
                parts.append(("ask", ask))
            name = f"merge{depth}_{j // fan_in}"
            nxt.append(llm_call(ctx, name, parts, "answer" if len(level) <= fan_in else name, gen)[2])
        level = nxt
    return level[0]


def _window(ctx: BuildContext) -> int:
    """The node's LLM engine's context window (0 = unknown)."""
    info = ctx.graph.engines.get(ctx.engine())
    return info.context_window if info is not None else 0


def _ask(ctx: BuildContext) -> str:
    ask = ctx.config.get("ask", prompts.ASK)
    if ask is not None and not isinstance(ask, str):
        raise ValueError(f"node {ctx.node.name!r}: config 'ask' must be a text or null, got {ask!r}")
    return ask or ""


def _fan_in(ctx: BuildContext, max_tokens: int, fixed: list[str]) -> int:
    """How many answers of up to `max_tokens` tokens one merge prompt holds (at least 2)."""
    budget = context_budget(_window(ctx), fixed, max_tokens)
    return max(2, budget // max_tokens) if budget > 0 else 3
