"""When decode pipelining pays: the cost model pass `decode_pipelining` gates each split on.

Pipelining streams a splittable decode and hands each complete item downstream at once. What it
can save is the work of the first n - 1 items' readers (the primitives that map over the items, up
to the join that gathers them), which then runs while the rest of the output decodes; it can never
save more than the decode left after the first item, T * decode_step_s * (n - 1) / n for an output
of about T tokens. What it adds: each reader split per item is one request more on its own engine
(n - 1 more per reader). Predicted gain per decode, in seconds off the query's critical path:

    gain = min(decode_step_s * T * (n - 1) / n, (n - 1) * item_s) - (n - 1) * request_s

item_s: one item's reader work, summed along its chain; request_s: the fixed cost of one request,
summed over the readers split per item. The decode is split only when gain > 0 (so never for one
item: nothing overlaps). A reader's costs come from its engine: an LLM engine's reported costs (a
request, the item's prefill, its decode), or its op costs (base + per_item seconds of the reader's
op: from the `op_cost` table of a profile named in the pass's options, `engines/profiles/*.json`,
else as the engine reported them at start, engines.machine.op_costs). One item's request then
costs base + per_item, overlapped, and adds base: such a reader adds (n - 1) * per_item to the gain
where the decode left does not bound it. A reader whose engine reports none, or whose fit has an
error over MAX_FIT_ERROR, is counted as no work (and named in the gate line): the gate then claims
no overlap it cannot predict. T is the decode's `max_tokens`, an upper bound: a decode that stops
early overlaps less, and the shared cores of a CPU machine are not in the model; `python -m bench
pass_gate` puts the prediction beside the measured effect. Without the decode's own costs every
splittable decode is pipelined, as before the gate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engines.llm_text.costs import EngineCosts


@dataclass(slots=True, kw_only=True)
class ReaderWork:
    """The readers of one decode's items: item_s, one item's work along the chain; request_s, the
    fixed cost of the requests one more item adds; unknown, readers whose engine reports no costs;
    untrusted, readers whose engine's fit is too poor to use, each with why."""

    item_s: float = 0.0
    request_s: float = 0.0
    unknown: list[str] = field(default_factory=list)
    untrusted: list[str] = field(default_factory=list)

    def note(self) -> str:
        """What the gate line says of the readers it counted as no work ("" when none)."""
        notes = [f"no costs for {', '.join(self.unknown)}"] if self.unknown else []
        if self.untrusted:
            notes.append(f"costs not used for {', '.join(self.untrusted)}")
        return "; ".join(notes)


def predicted_gain(out_tokens: int, n_items: int, costs: EngineCosts, readers: ReaderWork) -> float:
    """Seconds pipelining a decode of up to `out_tokens` tokens into `n_items` items saves: the first
    items' reader work it overlaps, at most the decode left after the first item, less the requests
    each extra item adds."""
    if n_items < 2:
        return -readers.request_s
    window = costs.decode_step_s * out_tokens * (n_items - 1) / n_items
    return min(window, (n_items - 1) * readers.item_s) - (n_items - 1) * readers.request_s


def llm_item_s(costs: EngineCosts, prefill_tokens: int, decode_tokens: int) -> float:
    """One item's work on an LLM engine: a request, its prompt's prefill and its decode."""
    return costs.request_s + prefill_tokens * costs.prefill_token_s + decode_tokens * costs.decode_step_s
