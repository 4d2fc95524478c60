"""Pass 4, decode pipelining: a `splittable` Decoding becomes one Partial Decoding per item; each
item goes downstream as soon as it is parsed from the stream, and readers that map over the items
are split per item so each one starts on its own item.

A decode is split only where the engine's known costs predict it pays
(`teola.passes.decode_pipelining_cost`: the first items' reader work, which the rest of the decode
overlaps, against the requests the split readers add); without known costs every splittable decode
is, and `gate=False` splits every one."""

from __future__ import annotations

from engines.requests import DECODE_OPS, PREFILL_OPS
from teola.ir.graph import Graph
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.ir.refs import part_key
from teola.passes.decode_pipelining_cost import ReaderWork, llm_item_s, predicted_gain
from teola.passes.engine_costs import (
    MAX_FIT_ERROR,
    costs_for,
    op_cost_for,
    record,
    record_unreliable,
    unreliable,
)
from teola.passes.prefill_split_cost import estimated_tokens
from teola.passes.result import PassResult
from teola.passes.split_map import redistribute

DEFAULT_MAX_TOKENS = 128  # a decode's default max_tokens (teola.compile.components.options)


def decode_pipelining(graph: Graph, gate: bool = True, profile: str | None = None) -> PassResult:
    """gate: split only where the predicted gain is positive; profile: the LLM engines' costs to
    predict with (a shipped profile's name or a file; default: the costs the decode's engine reported
    at start; with none known every splittable decode is split)."""
    g = graph.copy()
    modified = False
    for d in g.find(PrimOp.DECODING):
        n = d.args.get("n_items", 0)
        if not d.args.get("splittable") or n < 1:
            continue
        if gate and not _pays(g, d, n, profile):
            continue
        out = d.outputs[0]
        readers = [c for c in g.consumers(out)]
        parts = []
        for i in range(n):
            pd = g.add(
                d.clone(
                    op=PrimOp.PARTIAL_DECODING, outputs=(part_key(out, i, i + 1),), label=f"{d.label}[{i}]"
                )
            )
            pd.args.update(item=i, stream=out)
            for q in g.parents(d):
                g.connect(q, pd)
            parts.append(pd.outputs[0])
        g.remove(d)
        redistribute(g, out, [(i, i + 1) for i in range(n)], parts, readers, d.component)
        modified = True
    return PassResult(g, modified)


def _pays(g: Graph, d: Primitive, n: int, profile: str | None) -> bool:
    """Whether splitting `d` is predicted to pay (True when its engine's costs are unknown); with known
    costs the decision is recorded in the graph."""
    costs = costs_for(g, d.engine, profile)
    if costs is None:
        return True
    if unreliable(costs):
        record_unreliable(g, "decode_pipelining", d.name, costs)
        return False
    out_tokens = int(d.args.get("max_tokens") or DEFAULT_MAX_TOKENS)
    readers = reader_work(g, d, out_tokens // max(n, 1), profile)
    gain = predicted_gain(out_tokens, n, costs, readers)
    decision = "pipelined" if gain > 0 else "kept whole"
    record(g, "decode_pipelining", d.name, decision, gain, costs, readers.note())
    return gain > 0


def reader_work(g: Graph, d: Primitive, item_tokens: int, profile: str | None) -> ReaderWork:
    """The work of one of `d`'s items along its chain of readers (each maps over what the one before
    wrote, up to the join that gathers them), and the fixed cost each reader's extra request adds."""
    work = ReaderWork()
    chain, seen = [(c, d.outputs[0]) for c in g.consumers(d.outputs[0])], set()
    while chain:
        r, key = chain.pop()
        if r.id in seen or key not in r.args.get("map", ()):
            continue
        seen.add(r.id)
        _add_reader(g, r, item_tokens, profile, work)
        chain.extend((c, out) for out in r.outputs for c in g.consumers(out))
    return work


def _add_reader(g: Graph, r: Primitive, item_tokens: int, profile: str | None, work: ReaderWork) -> None:
    if r.op in PREFILL_OPS | DECODE_OPS:
        costs = costs_for(g, r.engine, profile)
        if costs is not None and not unreliable(costs):
            decode = int(r.args.get("max_tokens") or DEFAULT_MAX_TOKENS) if r.op in DECODE_OPS else 0
            prompt = estimated_tokens(r.args.get("parts", []), item_tokens)[0]
            work.item_s += llm_item_s(costs, prompt, decode)
            work.request_s += costs.request_s
            return
    elif (op := op_cost_for(g, r.engine, r.op, profile)) is not None:
        if unreliable(op):
            work.untrusted.append(f"{r.name} (fit error {op.error:.0%} over {MAX_FIT_ERROR:.0%})")
            return
        work.item_s += op.base_s + op.item_s
        work.request_s += op.base_s
        return
    work.unknown.append(r.name)
