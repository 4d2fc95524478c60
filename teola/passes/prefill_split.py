"""Pass 3, prefill split: the prompt parts that are ready early (an instruction, a question that
comes before retrieved context) are prefilled as soon as they are, as a Partial Prefilling; a Full
Prefilling completes the prompt. Attention is causal, so only a prefix can be pre-computed, in
prompt order. Calls whose prompts start with the same parts (the refine steps' instruction, the
leaves of tree synthesis)
share one Partial Prefilling: the engine's prefix cache holds that prefix once.

A split is made only where the engine's known costs predict it pays (`teola.passes.prefill_split_cost`:
a prefix of constant text only never pays; with an engine profile, the prefix must add cacheable
blocks of the query's own data worth more prefill time than the extra request costs); `gate=False`
splits every ready prefix, as before the gate."""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Le

from teola.ir.graph import Graph
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.ir.refs import Ref
from teola.passes.engine_costs import costs_for, record, record_unreliable, unreliable
from teola.passes.prefill_split_cost import predicted_gain
from teola.passes.result import PassResult


def prefill_split(
    graph: Graph,
    max_partials: Annotated[int, Ge(1), Le(64)] = 1,
    gate: bool = True,
    profile: str | None = None,
    ref_tokens: Annotated[int, Ge(0), Le(100_000)] = 16,
) -> PassResult:
    """max_partials: how many growing prefixes may be prefilled ahead (1 = the parts ready first,
    as in Teola Fig. 6; more also prefills e.g. retrieved context while a previous call decodes).
    gate: split only where the predicted gain is positive; profile: the LLM engines' costs to predict
    with (a shipped profile's name or a file; default: the costs the call's engine reported at start;
    with none known only constant-text prefixes, which never pay, are left whole); ref_tokens: the tokens
    assumed for a part filled at run time."""
    g = graph.copy()
    writers = g.producers()
    modified = False
    shared: dict[tuple, Primitive] = {}
    for p in g.find(PrimOp.PREFILLING):
        parts = p.args["parts"]
        cuts = _cuts(parts, writers)[:max_partials]
        if gate and cuts:
            cuts = _gated(g, p, cuts, costs_for(g, p.engine, profile), ref_tokens)
        if not cuts:
            continue
        prev: Primitive | None = None
        for j, k in enumerate(cuts):
            sig = (p.engine, _signature(parts[:k]), prev.id if prev else None)
            if sig in shared:
                prev = shared[sig]
                continue
            reads = tuple(dict.fromkeys(r.key for _, r in parts[:k] if isinstance(r, Ref)))
            pp = g.add(
                p.clone(
                    op=PrimOp.PARTIAL_PREFILLING,
                    outputs=(f"{p.outputs[0]}.prefix{j}",),
                    inputs=reads + ((prev.outputs[0],) if prev else ()),
                    label=f"{p.label}.partial{j}",
                )
            )
            pp.args = {"parts": parts[:k]}
            _connect(g, pp, writers, prev)
            shared[sig] = pp
            prev = pp
        assert prev is not None  # cuts is not empty: the loop made or reused a partial prefill
        full = g.add(
            p.clone(op=PrimOp.FULL_PREFILLING, inputs=p.inputs + (prev.outputs[0],), label=f"{p.label}.full")
        )
        full.args["prefix_parts"] = cuts[-1]
        _connect(g, full, writers, prev)
        for c in g.children(p):
            g.connect(full, c)
        g.remove(p)
        writers[p.outputs[0]] = full.id
        modified = True
    return PassResult(g, modified)


def _gated(g: Graph, p: Primitive, cuts: list[int], costs, ref_tokens: int) -> list[int]:
    """The cuts predicted to pay; with known costs the decision on the longest is recorded (none
    with costs too poorly fitted to predict with)."""
    if costs is not None and unreliable(costs):
        record_unreliable(g, "prefill_split", p.name, costs)
        return []
    parts = p.args["parts"]
    gains = [predicted_gain(parts[:k], costs, ref_tokens) for k in cuts]
    kept = [k for k, gain in zip(cuts, gains) if gain > 0]
    if costs is not None:
        record(g, "prefill_split", p.name, "split" if kept else "kept whole", max(gains), costs)
    return kept


def _signature(parts: list) -> tuple:
    """What a prompt prefix is made of: each part's name and its text or the reference it reads."""
    return tuple((name, src if isinstance(src, (str, Ref)) else repr(src)) for name, src in parts)


def _cuts(parts: list, writers: dict[str, int]) -> list[int]:
    """Prefix lengths k (< len(parts)) after which the next part needs a new producer."""
    cuts: list[int] = []
    seen: frozenset[int] = frozenset()
    for k, (_, src) in enumerate(parts):
        need = frozenset([writers[src.key]]) if isinstance(src, Ref) and src.key in writers else frozenset()
        if k > 0 and not need <= seen:
            cuts.append(k)
        seen |= need
    return cuts


def _connect(g: Graph, prim, writers: dict[str, int], prev) -> None:
    for key in prim.inputs:
        if key in writers:
            g.connect(writers[key], prim)
    if prev is not None:
        g.connect(prev, prim)
