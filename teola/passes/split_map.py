"""Shared rewrite for pipelining passes: split a list-producing primitive into parts and carry the
split through downstream primitives that map over that list item by item.

Part keys name their item range (`key#a:b`), so the runtime can slice any list it is given."""

from __future__ import annotations

from teola.ir.graph import Graph
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.ir.refs import base_key, key_range, part_key


def ranges(start: int, stop: int, size: int) -> list[tuple[int, int]]:
    return [(a, min(a + size, stop)) for a in range(start, stop, size)]


def split_primitive(
    graph: Graph, prim: Primitive, slices: list[tuple[int, int]], sources: dict[str, list[str]] | None = None
) -> list[Primitive]:
    """Replace map primitive `prim` by one stage per slice; `sources` maps an input key to the
    per-slice part keys to read instead of slicing the whole list. Consumers of its outputs are
    split along (when they map item by item) or read the parts through a concat Aggregate."""
    sources = sources or {}
    stages = []
    for j, (a, b) in enumerate(slices):
        swap = {k: parts[j] for k, parts in sources.items()}
        st = prim.clone(
            inputs=tuple(swap.get(k, k) for k in prim.inputs),
            outputs=tuple(part_key(o, a, b) for o in prim.outputs),
            num_requests=b - a,
            label=f"{prim.label.split('[')[0]}[{a}:{b}]",
        )
        st.args["map"] = tuple(swap.get(k, k) for k in prim.args["map"])
        st.args["slice"] = (a, b)
        graph.add(st)
        _connect_writers(graph, st)
        stages.append(st)
    readers = {out: [c for c in graph.consumers(out) if c.id != prim.id] for out in prim.outputs}
    graph.remove(prim)
    for i, out in enumerate(prim.outputs):
        redistribute(graph, out, slices, [s.outputs[i] for s in stages], readers[out], prim.component)
    return stages


def redistribute(
    graph: Graph,
    key: str,
    slices: list[tuple[int, int]],
    parts: list[str],
    readers: list[Primitive],
    component: str,
) -> None:
    """`key` is now written in `parts`. Readers that map over it item by item are split the same
    way; every other reader (and the graph output) gets `key` back from a concat Aggregate."""
    total = sum(b - a for a, b in slices)
    agg = None
    for c in readers:
        if c.id not in graph.nx:
            continue
        if _maps_whole(c, key, total):
            split_primitive(graph, c, slices, {key: parts})
            continue
        if agg is None:
            agg = _aggregate(graph, key, parts, component)
        graph.connect(agg, c)
    if agg is None and key in graph.outputs:
        _aggregate(graph, key, parts, component)


def _maps_whole(c: Primitive, key: str, total: int) -> bool:
    return (
        key in c.args.get("map", ())
        and c.num_requests == total
        and "slice" not in c.args
        and all(key_range(k) is None for k in c.args["map"])
    )


def _aggregate(graph: Graph, key: str, parts: list[str], component: str) -> Primitive:
    r = key_range(key)
    label = f"gather[{base_key(key).split('.')[-1]}{'' if r is None else f'#{r[0]}:{r[1]}'}]"
    agg = graph.add(
        Primitive(
            PrimOp.AGGREGATE,
            None,
            component,
            inputs=tuple(parts),
            outputs=(key,),
            args={"mode": "concat"},
            label=label,
        )
    )
    _connect_writers(graph, agg)
    return agg


def _connect_writers(graph: Graph, prim: Primitive) -> None:
    writers = graph.producers()
    for k in prim.inputs:
        if k in writers:
            graph.connect(writers[k], prim)
