"""Query + template + config -> primitive-level dataflow graph (Teola Algorithm 1)."""

from __future__ import annotations

from collections import deque
from typing import Any

from teola.compile.chunk_tokenizer import chunk_tokenizer
from teola.compile.chunking import DEFAULT_SPLIT, ChunkLimitError, chunk_documents, document_text
from teola.compile.components import BuildContext, Port, lookup, options_model
from teola.ir.engine_spec import Engine
from teola.ir.graph import Graph
from teola.ir.node import Node
from teola.ir.primitive import Primitive
from teola.passes.option_errors import validate_options

MAX_CHUNKS = 20_000
# the chunks of a query's documents hold at most this many times their characters: overlapping
# windows repeat text, at most about twice with chunk_overlap <= chunk_size / 2
MAX_CHUNK_TEXT_RATIO = 3


def check_overlap(chunk_size: int, overlap: int, where: str) -> None:
    """ValueError unless 0 <= `overlap` <= `chunk_size` // 2: consecutive windows then step at least
    half a window, so chunks repeat a document's text about twice at most."""
    if not 0 <= overlap <= chunk_size // 2:
        raise ValueError(
            f"{where}: chunk_overlap {overlap} must be between 0 and half of chunk_size "
            f"({chunk_size} // 2 = {chunk_size // 2}); lower chunk_overlap or raise chunk_size"
        )


def node_config(node: Node, config: dict[str, Any]) -> dict[str, Any]:
    """The node's config with the query's overrides (`config["nodes"][node.name]`) on top."""
    overrides = (config.get("nodes") or {}).get(node.name, {})
    if not isinstance(overrides, dict):
        raise TypeError(f"config['nodes'][{node.name!r}] must be a dict, got {type(overrides).__name__}")
    return {**node.config, **overrides}


def check_node_options(order: list[Node], config: dict[str, Any]) -> None:
    """Validate every node's options (its own config with the query's overrides on top) against its
    kind's options model: ValueError naming config.nodes.<node>.<key> for an override, or the
    node's own config for the app's mistake."""
    for node in order:
        model = options_model(node.kind)
        if model is None:
            continue
        merged = node_config(node, config)
        overrides = (config.get("nodes") or {}).get(node.name) or {}
        validate_options(
            model,
            merged,
            lambda key, n=node.name, o=overrides: f"config.nodes.{n}" if key in o else f"node {n!r} config",
        )


class ReadTracking(dict):
    """A node's config that records which keys its decomposer looked at."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.read: set[str] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(key)  # type: ignore[arg-type]
        return super().__contains__(key)


# read by the compiler itself, not by the node's decomposer
_COMPILER_KEYS = {"indexing": {"chunk_size", "chunk_overlap", "max_chunks", "tokenizer", "split"}}


def _check_overrides(node: Node, config: dict[str, Any], seen: ReadTracking) -> None:
    """A query's per-node options that the node never read are typos or options of another kind:
    ValueError naming config.nodes.<node>.<key> (the app's own Node config is not checked)."""
    overrides = (config.get("nodes") or {}).get(node.name) or {}
    unused = sorted(set(overrides) - seen.read - _COMPILER_KEYS.get(node.kind, set()))
    if unused:
        used = sorted(k for k in seen.read if isinstance(k, str))
        raise ValueError(
            f"config.nodes.{node.name}.{unused[0]}: option(s) {', '.join(map(repr, unused))} are not "
            f"used by this {node.kind} node as configured; it reads: {', '.join(used) or 'none'}"
        )


def query_inputs(query: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(query, dict):
        raise TypeError(f"a query must be a dict like {{'question': ...}}, got {type(query).__name__}")
    return {f"query.{k}": v for k, v in query.items()}


def build_pgraph(
    order: list[Node],
    engines: dict[str, Engine],
    query: dict[str, Any],
    config: dict[str, Any],
    initial: dict[str, Any],
) -> Graph:
    """Decompose every node (in template order) into a sub-graph of primitives; join the
    sub-graphs along the template's edges (tail primitives -> head primitives) and along every
    data dependency. `initial` holds the query's values and receives compile-time data (chunks)."""
    graph = Graph(
        engines={name: e.info() for name, e in engines.items()}, components=tuple(n.name for n in order)
    )
    exports: dict[str, dict[str, Port]] = {}
    subs: dict[str, list[Primitive]] = {}
    kinds = {name: e.kind for name, e in engines.items()}
    for node in order:
        fn, _, _ = lookup(node.kind)
        seen = ReadTracking(node_config(node, config))
        ctx = BuildContext(
            graph,
            node,
            seen,
            query,
            initial,
            _ancestors(node, exports),
            kinds,
            own_namespace=config.get("namespace") is None,
        )
        if node.kind == "aggregate":
            fn(ctx, [exports[p.name] for p in node.upstream])  # type: ignore[call-arg]
        else:
            fn(ctx)
        _check_overrides(node, config, seen)
        if not ctx.sub.prims:
            raise ValueError(f"node {node.name!r} ({node.kind}) produced no primitives")
        exports[node.name] = ctx.sub.exports
        subs[node.name] = ctx.sub.prims
        for parent in node.upstream:
            if parent.kind == "condition":
                _guard(graph, ctx.sub.prims, exports[parent.name]["branch"].key)
            for t in _tails(graph, subs[parent.name]):
                for h in _heads(graph, ctx.sub.prims):
                    graph.connect(t, h)
    graph.inputs = frozenset(initial)
    graph.outputs = tuple(_primary(exports[n.name]).key for n in order if not n.downstream)
    return graph


def prepare_inputs(
    order: list[Node], query: dict[str, Any], config: dict[str, Any], engines: dict[str, Engine] | None = None
) -> dict[str, Any]:
    """The values a query starts with: its own fields and data prepared at compile time (chunks,
    counted in the tokens of the indexing node's embedding engine when `engines` has it)."""
    initial = query_inputs(query)
    for node in order:
        if node.kind == "indexing":
            cfg = node_config(node, config)
            docs = query.get("documents", [])
            if not isinstance(docs, list):
                raise TypeError("query['documents'] must be a list of strings or {'text': str} objects")
            size, overlap = cfg.get("chunk_size", 256), cfg.get("chunk_overlap", 30)
            if not isinstance(size, int) or not isinstance(overlap, int):
                raise ValueError(f"node {node.name!r}: chunk_size and chunk_overlap must be ints")
            check_overlap(size, overlap, f"node {node.name!r}")
            engine = (engines or {}).get(node.engine) if node.engine is not None else None
            tokenizer = chunk_tokenizer(engine, cfg.get("tokenizer") or "engine")
            texts = [document_text(d, i) for i, d in enumerate(docs)]
            limit = cfg.get("max_chunks", MAX_CHUNKS)
            chars = MAX_CHUNK_TEXT_RATIO * sum(len(t) for t in texts)
            try:
                chunks = chunk_documents(
                    texts,
                    size,
                    overlap,
                    tokenizer,
                    max_chunks=limit,
                    max_chars=chars,
                    split=cfg.get("split") or DEFAULT_SPLIT,
                )
            except ChunkLimitError as exc:
                raise ValueError(_limit_message(node.name, exc, size, overlap)) from None
            initial[f"{node.name}.chunks"] = chunks
    return initial


def _limit_message(node: str, exc: ChunkLimitError, size: int, overlap: int) -> str:
    if exc.what == "chunks":
        return (
            f"node {node!r}: the documents make more than {exc.limit} chunks of {size} tokens; send fewer "
            "or smaller documents, or raise config 'max_chunks'"
        )
    return (
        f"node {node!r}: the chunks of {size} tokens overlapping by {overlap} would hold more than "
        f"{MAX_CHUNK_TEXT_RATIO} times the documents' text ({exc.limit} characters); lower chunk_overlap"
    )


def _ancestors(node: Node, exports: dict[str, dict[str, Port]]) -> list[tuple[Node, dict[str, Port]]]:
    seen, out, queue = {node.name}, [], deque(node.upstream)
    while queue:
        n = queue.popleft()
        if n.name in seen:
            continue
        seen.add(n.name)
        out.append((n, exports[n.name]))
        queue.extend(n.upstream)
    return out


def _guard(graph: Graph, prims: list[Primitive], branch_key: str) -> None:
    writer = graph.producers()[branch_key]
    for p in prims:
        if branch_key not in p.inputs:
            p.inputs = p.inputs + (branch_key,)
            p.args["guard"] = branch_key
            graph.connect(writer, p)


def _heads(graph: Graph, prims: list[Primitive]) -> list[Primitive]:
    ids = {p.id for p in prims}
    return [p for p in prims if not any(q.id in ids for q in graph.parents(p))]


def _tails(graph: Graph, prims: list[Primitive]) -> list[Primitive]:
    ids = {p.id for p in prims}
    return [p for p in prims if not any(q.id in ids for q in graph.children(p))]


def _primary(exports: dict[str, Port]) -> Port:
    for name in ("text", "context", "results", "items", "queries", "index"):
        if name in exports:
            return exports[name]
    return next(iter(exports.values()))
