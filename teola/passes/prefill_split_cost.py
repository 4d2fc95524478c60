"""When a Partial Prefilling pays: the cost model pass `prefill_split` gates each split on.

A partial prefill is one more request to the LLM engine. It can only save the prefill of the
prompt blocks the engine's prefix cache keeps (whole KV blocks) and that nothing cached already:
blocks made only of constant text (an instruction, a label, the chat template) are cached by the
previous call of the same component, so in steady state only blocks that hold a query's own data
(its question, an earlier answer) are new. Predicted gain per call, in seconds of prefill moved off
the call's critical path:

    gain = (blocks(all prefix tokens) - blocks(leading constant tokens)) * block_size * prefill_token_s
           - request_s

and the split is made only when gain > 0. Tokens are estimated at compile time: a text part as
len(text) / CHARS_PER_TOKEN, a part the query or an upstream primitive fills as `ref_tokens`.

The first rule needs no costs: a prefix of constant text only gains nothing and costs a request, so it
is never split. The formula needs an engine's costs: a profile named in the pass's options, e.g. the
shipped `cpu-smollm2-135m` measured on this machine (`base`, one engine step, is the request's cost;
`prefill_token`; `block_size`), else the costs the call's engine reported when it started (fitted at
start by a short probe: engines.llm_text.cost_probe). Without any, a prefix holding query data is
split as before.
"""

from __future__ import annotations

from engines.llm_text.costs import EngineCosts
from teola.ir.refs import Ref

CHARS_PER_TOKEN = 4.0  # English text in a BPE tokenizer (SmolLM2: ~4.2 characters per token)


def estimated_tokens(parts: list, ref_tokens: int) -> tuple[int, int]:
    """(all tokens, leading constant tokens) of the prompt parts, estimated."""
    total = lead = 0.0
    constant = True
    for _, src in parts:
        if isinstance(src, Ref):
            total += ref_tokens
            constant = False
        else:
            total += len(str(src)) / CHARS_PER_TOKEN
            if constant:
                lead = total
    return int(total), int(lead)


def predicted_gain(parts: list, costs: EngineCosts | None, ref_tokens: int) -> float:
    """Seconds a partial prefill of `parts` saves its call, less the request it costs. A prefix of
    constant text only saves nothing whatever the costs (the previous call cached it); without known
    costs any other prefix is assumed to pay (inf)."""
    if not any(isinstance(src, Ref) for _, src in parts):
        return -(costs.request_s if costs is not None else 0.0)
    if costs is None:
        return float("inf")
    total, lead = estimated_tokens(parts, ref_tokens)
    bs = costs.block_size
    new_blocks = total // bs - lead // bs
    return new_blocks * bs * costs.prefill_token_s - costs.request_s
