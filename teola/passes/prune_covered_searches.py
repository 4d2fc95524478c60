"""Pass 0, covered-search pruning: drop searches that cannot change what the reranker keeps, and
the work that only fed them.

A query that indexes its own documents into a namespace made for it searches an index of known
size, and searches it exactly (the vector store scans the namespace). The question's own search
comes first among the searches gathered for a reranker; the others are the expanded queries of
advanced RAG. Every reader of the gathered list must be a reranker (it scores each distinct text
against the question and keeps the best `top_n`); without one the duplicates would reach the
prompt, so nothing is dropped. The question's own search covers the others when either:

- it returns every chunk (`top_k >= chunks`), so the others can only return chunks it has; or
- the reranker scores by the same ranking the search used (engines' `ranks_by`: the cosine of the
  same bi-encoder's embeddings of the same question, as the offline default reranker does, on a
  store that ranks own-namespace searches exactly) and `top_n <= top_k`: the reranker's best
  `top_n` over everything gathered are then the question's own best `top_n`, which its search
  already holds. (Up to the floating-point noise between the stored vectors and the reranker's
  re-encoding, which can only swap chunks whose scores tie to about 1e-6.) A cross-encoder
  reranker declares no such ranking, and the expanded searches stay.

Then the answer is the same without the other searches: the pass removes them, and every
primitive that only fed them (their query embeddings, the query-expansion LLM call). Turn it off
per query with `{"passes": {"prune_covered_searches": false}}`.
"""

from __future__ import annotations

from engines.requests import default
from teola.ir.graph import Graph
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.passes.result import PassResult

# What may be removed once nothing reads it: work without side effects outside the query.
_PURE = frozenset(
    {
        PrimOp.EMBEDDING,
        PrimOp.SEARCHING,
        PrimOp.AGGREGATE,
        PrimOp.PREFILLING,
        PrimOp.PARTIAL_PREFILLING,
        PrimOp.FULL_PREFILLING,
        PrimOp.DECODING,
        PrimOp.PARTIAL_DECODING,
    }
)


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
    first = _writer(g, writers, gather.inputs[0])
    if first is None or not (
        _covers(first, chunks) or all(_ranks_alike(g, first, r, writers) for r in readers)
    ):
        return []
    rest = [k for k in gather.inputs[1:] if _search_results(g, writers, k)]
    if not rest:
        return []
    gather.inputs = tuple(k for k in gather.inputs if k not in rest)
    for k in rest:
        if g.nx.has_edge(writers[k], gather.id):
            g.disconnect(writers[k], gather)
    for r in readers:
        r.num_requests = max(1, min(chunks, int(default(first.args, "top_k"))))
    return rest


def _covers(search: Primitive, chunks: int) -> bool:
    """One query's search that returns every chunk of the index."""
    return (
        search.op is PrimOp.SEARCHING
        and search.num_requests == 1
        and 0 < chunks <= int(default(search.args, "top_k"))
    )


def _ranks_alike(g: Graph, search: Primitive, reranker: Primitive, writers: dict[str, int]) -> bool:
    """The reranker orders texts by the score `search` ranked the whole index by, and keeps no more
    than `search` returned."""
    top_n, top_k = reranker.args.get("top_n", 0), default(search.args, "top_k")
    if search.op is not PrimOp.SEARCHING or search.num_requests != 1 or not 0 < top_n <= top_k:
        return False
    scorer = _ranks_by(g, reranker)
    if not scorer.startswith("cosine:") or _ranks_by(g, search) != "cosine":
        return False
    query_vector = _writer(g, writers, search.inputs[0]) if search.inputs else None
    if (
        query_vector is None
        or query_vector.op is not PrimOp.EMBEDDING
        or _ranks_by(g, query_vector) != scorer
        or query_vector.inputs[:1] != reranker.inputs[:1]
    ):
        return False  # the search's query is not the reranker's query embedded by the same model
    for ingest in g.find(PrimOp.INGESTION):  # the stored vectors come from the same model
        stored = _writer(g, writers, ingest.inputs[0]) if ingest.inputs else None
        if stored is None or stored.op is not PrimOp.EMBEDDING or _ranks_by(g, stored) != scorer:
            return False
    return True


def _writer(g: Graph, writers: dict[str, int], key: str) -> Primitive | None:
    return g[writers[key]] if key in writers else None


def _ranks_by(g: Graph, p: Primitive) -> str:
    info = g.engines.get(p.engine or "")
    return info.ranks_by if info is not None else ""


def _search_results(g: Graph, writers: dict[str, int], key: str) -> bool:
    """The key holds only hits of searches over the query's index (directly or concatenated)."""
    if key not in writers:
        return False
    p = g[writers[key]]
    if p.op is PrimOp.SEARCHING:
        return True
    return (
        p.op is PrimOp.AGGREGATE
        and p.args.get("mode") == "concat"
        and bool(p.inputs)
        and all(_search_results(g, writers, k) for k in p.inputs)
    )


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
