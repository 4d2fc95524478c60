"""When decode pipelining pays: the cost model pass `decode_pipelining` gates each split on.

Pipelining streams a splittable decode and hands each complete item downstream at once. The item's
readers then start while the rest of the output decodes: with n items over an output of about T
tokens, the first n - 1 items' readers may overlap up to (n - 1) / n of the decode, T * decode_step_s
seconds in all. What it adds: each reader split per item is one request more on its own engine (n - 1
more per reader), costing that engine's request_s where the engine reports its costs (LLM engines
do; others are counted as free). Predicted gain per decode, in seconds off the query's critical path:

    gain = decode_step_s * T * (n - 1) / n - (n - 1) * sum(readers' request_s)

and the decode is split only when gain > 0 (so never for one item: nothing overlaps). T is the
decode's `max_tokens`, an upper bound: a decode that stops early overlaps less, and the shared cores
of a CPU machine (the LLM and the readers' engines computing at once) are not in the model; the
study `python -m bench pass_gate` puts the prediction beside the measured effect. Without known
costs every splittable decode is pipelined, as before the gate.
"""
from __future__ import annotations

from engines.llm_text.costs import EngineCosts


def predicted_gain(out_tokens: int, n_items: int, costs: EngineCosts, reader_request_s: float) -> float:
    """Seconds pipelining a decode of up to `out_tokens` tokens into `n_items` items saves, less the
    `reader_request_s` (summed over the readers split per item) each extra item's requests cost."""
    if n_items < 2:
        return -reader_request_s
    window = costs.decode_step_s * out_tokens * (n_items - 1) / n_items
    return window - (n_items - 1) * reader_request_s
