"""Pass 0, covered-search pruning: drop searches whose hits another search already returns, and the
work that only fed them.

A query that indexes its own documents into a namespace made for it searches an index of known
size. When the question's own search asks for at least as many hits as that index holds
(`top_k >= chunks`), it returns every chunk, so the other searches gathered with it (the expanded
queries of advanced RAG) can only return chunks it already has. If every reader of the gathered
list is a reranker (which scores each distinct text against the question and keeps the best), the
answer is the same without them: the pass removes those searches, then every primitive that only
fed them (their query embeddings, the query-expansion LLM call). Without a reranker the duplicates
would reach the prompt, so nothing is dropped. Turn it off per query with
`{"passes": {"prune_covered_searches": false}}`.
"""
from __future__ import annotations

from teola.graph import Graph
from teola.ops import PrimOp
from teola.passes.result import PassResult
from teola.primitive import Primitive

# What may be removed once nothing reads it: work without side effects outside the query.
_PURE = frozenset({PrimOp.EMBEDDING, PrimOp.SEARCHING, PrimOp.AGGREGATE, PrimOp.PREFILLING,
                   PrimOp.PARTIAL_PREFILLING, PrimOp.FULL_PREFILLING, PrimOp.DECODING, PrimOp.PARTIAL_DECODING})


def prune_covered_searches(graph: Graph) -> PassResult:
    g = graph.copy()
    chunks = _private_index_size(g)
    if chunks is None:
        return PassResult(g, False)
    dropped: list[str] = []
    for gather in g.find(PrimOp.AGGREGATE):
        dropped += _prune_gather(g, gather, chunks)
    if not dropped:
        return PassResult(g, False)
    _remove_unread(g, dropped)
    return PassResult(g, True)


def _private_index_size(g: Graph) -> int | None:
    """Chunks in the query's own namespace (every ingestion of the graph), or None when a search
    may see chunks this query did not write (a namespace kept across queries)."""
    searches = g.find(PrimOp.SEARCHING)
    if not searches or not all(s.args.get("own_namespace") for s in searches):
        return None
    return sum(p.num_requests for p in g.find(PrimOp.INGESTION))


def _prune_gather(g: Graph, gather: Primitive, chunks: int) -> list[str]:
    if gather.args.get("mode") != "concat" or len(gather.inputs) < 2:
        return []
    readers = g.consumers(gather.outputs[0])
    if not readers or any(r.op is not PrimOp.RERANKING for r in readers):
        return []
    writers = g.producers()
    first = g[writers[gather.inputs[0]]] if gather.inputs[0] in writers else None
    if first is None or not _covers(first, chunks):
        return []
    rest = [k for k in gather.inputs[1:] if _search_results(g, writers, k)]
    if not rest:
        return []
    gather.inputs = tuple(k for k in gather.inputs if k not in rest)
    for k in rest:
        if g.nx.has_edge(writers[k], gather.id):
            g.disconnect(writers[k], gather)
    for r in readers:
        r.num_requests = max(1, chunks)
    return rest


def _covers(search: Primitive, chunks: int) -> bool:
    """One query's search that returns every chunk of the index."""
    return (search.op is PrimOp.SEARCHING and search.num_requests == 1
            and 0 < chunks <= int(search.args.get("top_k", 0)))


def _search_results(g: Graph, writers: dict[str, int], key: str) -> bool:
    """The key holds only hits of searches over the query's index (directly or concatenated)."""
    if key not in writers:
        return False
    p = g[writers[key]]
    if p.op is PrimOp.SEARCHING:
        return True
    return (p.op is PrimOp.AGGREGATE and p.args.get("mode") == "concat" and bool(p.inputs)
            and all(_search_results(g, writers, k) for k in p.inputs))


def _remove_unread(g: Graph, keys: list[str]) -> None:
    """Remove the writers of `keys`, then every pure primitive left with no reader, upstream."""
    todo = [pid for k, pid in g.producers().items() if k in keys]
    while todo:
        pid = todo.pop()
        if pid not in g.nx:
            continue
        p = g[pid]
        read = any(k in g.outputs or g.consumers(k) for k in p.outputs)
        if p.op not in _PURE or read:
            continue
        parents = [q.id for q in g.parents(p)]
        g.remove(p)
        todo.extend(parents)
