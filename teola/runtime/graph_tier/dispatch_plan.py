"""What the graph scheduler precomputes once per e-graph (e-graphs are cached and shared by
queries of the same shape): index order, in-degrees, children, Partial Decoding stream groups and
dependent pre-scheduling (fusion) opportunities."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import networkx as nx

from teola.ir.graph import Graph
from teola.ir.ops import CONTROL_OPS, PrimOp
from teola.ir.primitive import Primitive

FUSABLE_PREFILLS = frozenset({PrimOp.PREFILLING, PrimOp.FULL_PREFILLING})


@dataclass(slots=True)
class DispatchPlan:
    """prims in topological order (position = index used by the scheduler)."""

    prims: list[Primitive]
    indeg: list[int]
    children: list[tuple[int, ...]]
    roots: list[int]
    control: list[bool]
    groups: dict[int, tuple[int, ...]] = field(default_factory=dict)  # PD index -> its group, by item
    fuse: dict[int, tuple[int, ...]] = field(default_factory=dict)  # prefill index -> fused children
    outputs: tuple[str, ...] = ()
    ingest_engines: frozenset[str] = frozenset()
    answer: frozenset[int] = frozenset()  # decodes whose text is the output (directly or via control prims)
    remote: dict[int, frozenset[str]] = field(default_factory=dict)  # see remote_outputs
    speculative: dict[str, tuple[int, ...]] = field(
        default_factory=dict
    )  # branch key -> its speculative prims
    warmups: dict[int, tuple[int, ...]] = field(
        default_factory=dict
    )  # index -> its Partial Prefilling parents


def build_plan(graph: Graph) -> DispatchPlan:
    prims = graph.primitives
    index = {p.id: i for i, p in enumerate(prims)}
    g = graph.nx
    indeg = [g.in_degree(p.id) for p in prims]
    children = [tuple(sorted(index[c] for c in g.successors(p.id))) for p in prims]
    plan = DispatchPlan(
        prims,
        indeg,
        children,
        [i for i, d in enumerate(indeg) if d == 0],
        [p.op in CONTROL_OPS for p in prims],
        outputs=tuple(graph.outputs),
        ingest_engines=frozenset(p.engine for p in prims if p.op is PrimOp.INGESTION and p.engine),
    )
    streams: dict[str, list[int]] = {}
    for i, p in enumerate(prims):
        if p.op is PrimOp.PARTIAL_DECODING:
            streams.setdefault(p.args.get("stream", p.inputs[0] if p.inputs else p.name), []).append(i)
    for members in streams.values():
        group = tuple(sorted(members, key=lambda i: prims[i].args.get("item", 0)))
        for i in group:
            plan.groups[i] = group
    for i, p in enumerate(prims):
        if p.op in FUSABLE_PREFILLS and p.engine is not None:
            kids = _fusable_children(graph, plan, i, index)
            if kids:
                plan.fuse[i] = kids
    plan.answer = _answer_decodes(prims, plan.outputs)
    plan.remote = remote_outputs(plan)
    for i, p in enumerate(prims):
        if (key := p.args.get("speculate_on")) is not None:
            plan.speculative[key] = plan.speculative.get(key, ()) + (i,)
        if p.op is PrimOp.PARTIAL_PREFILLING:
            for c in children[i]:
                plan.warmups[c] = plan.warmups.get(c, ()) + (i,)
    return plan


PASS_THROUGH = frozenset({PrimOp.INGESTION, PrimOp.SEARCHING})  # put an embedding into a request as is


def remote_outputs(plan: DispatchPlan) -> dict[int, frozenset[str]]:
    """The primitives whose results may stay in a remote executor's object store (the Ray "refs"
    data path), each with the object-store keys that then hold references instead of values:
    embeddings read only by ingestion / vector search (which hand each vector to their engine
    untouched), directly or through concat aggregates (split stages gathered), and never a query
    output. Everything else (texts, hits, scores, LLM states) is read by the driver itself."""
    found: dict[int, frozenset[str]] = {}
    for i, p in enumerate(plan.prims):
        if p.op is PrimOp.EMBEDDING and p.engine is not None and len(p.outputs) == 1:
            keys = _opaque_keys(plan, i, p.outputs[0])
            if keys:
                found[i] = keys
    return found


def _opaque_keys(plan: DispatchPlan, i: int, key: str) -> frozenset[str] | None:
    """`key` (written by primitive i) and the aggregate outputs carrying it, if every reader only
    passes its items through to an engine; else None."""
    if key in plan.outputs or not plan.children[i]:
        return None
    keys = {key}
    for c in plan.children[i]:
        q = plan.prims[c]
        if key not in q.inputs:
            continue
        if q.op is PrimOp.AGGREGATE and q.args.get("mode") == "concat" and len(q.outputs) == 1:
            more = _opaque_keys(plan, c, q.outputs[0])
            if more is None:
                return None
            keys |= more
        elif not (
            q.op in PASS_THROUGH
            and q.engine is not None
            and not q.args.get("text_query")
            and tuple(q.args.get("map", ()))[:1] == (key,)
            and key not in q.args["map"][1:]
            and q.args.get("guard") != key
        ):
            return None
    return frozenset(keys)


def _answer_decodes(prims: list[Primitive], outputs: tuple[str, ...]) -> frozenset[int]:
    """The decoding primitives whose generated text becomes the query's output: producers of an
    output key, looking through aggregates to the decodes feeding them (for a "first" aggregate,
    only its first input: the others are fallbacks known to be the answer only after the fact)."""
    producer = {k: i for i, p in enumerate(prims) for k in p.outputs}
    found: set[int] = set()
    todo, seen = [producer[k] for k in outputs if k in producer], set()
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        op = prims[i].op
        if op is PrimOp.DECODING:
            found.add(i)
        elif op is PrimOp.AGGREGATE:
            inputs = prims[i].inputs[:1] if prims[i].args.get("mode") == "first" else prims[i].inputs
            todo.extend(producer[k] for k in inputs if k in producer)
    return frozenset(found)


def _fusable_children(
    graph: Graph, plan: DispatchPlan, i: int, index: dict[int, int]
) -> tuple[int, ...] | None:
    """A prefill fuses into its decode(s) when they are its only children, on its engine, read
    nothing but its state (and keys its own ancestors produce), and its state is not an output."""
    p = plan.prims[i]
    kids = plan.children[i]
    if not kids or len(p.outputs) != 1 or p.outputs[0] in plan.outputs:
        return None
    ops = {plan.prims[c].op for c in kids}
    if ops == {PrimOp.DECODING}:
        if len(kids) != 1:
            return None
    elif ops == {PrimOp.PARTIAL_DECODING}:
        if set(plan.groups.get(kids[0], ())) != set(kids):
            return None
    else:
        return None
    anc = nx.ancestors(graph.nx, p.id)
    for c in kids:
        d = plan.prims[c]
        if d.engine != p.engine or p.outputs[0] not in d.inputs:
            return None
        if any(q != p.id and q not in anc for q in graph.nx.predecessors(d.id)):
            return None
    return tuple(sorted(kids, key=lambda c: plan.prims[c].args.get("item", 0)))


class DispatchPlanCache:
    """Plans by graph identity (compiled graphs are shared and read-only), LRU-bounded."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._items: OrderedDict[int, tuple[Graph, DispatchPlan]] = OrderedDict()

    def get(self, graph: Graph) -> DispatchPlan:
        key = id(graph)
        hit = self._items.get(key)
        if hit is not None and hit[0] is graph:
            self._items.move_to_end(key)
            return hit[1]
        plan = build_plan(graph)
        self._items[key] = (graph, plan)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return plan
