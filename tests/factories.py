"""Test factories: apps and graphs built from the public API, no engines started."""

from __future__ import annotations

from teola import App, Engine, Graph, Primitive, PrimOp
from teola.ir.graph import EngineInfo
from teola.scheduling.base import Pending

DOC = " ".join(f"Sentence {i} says that fact {i} is true." for i in range(60))


def make_engines(app: App, max_eff: dict[str, int] | None = None) -> App:
    """Register the usual engines by spec only (compiling needs no running engine)."""
    m = max_eff or {}
    app.register_engine(Engine("llm", kind="vllm", max_efficient_batch=m.get("llm")))
    app.register_engine(
        Engine("embedding", kind="sentence_transformers", max_efficient_batch=m.get("embedding"))
    )
    app.register_engine(Engine("vectordb", kind="pgvector", max_efficient_batch=m.get("vectordb")))
    app.register_engine(Engine("reranker", kind="reranker", max_efficient_batch=m.get("reranker")))
    app.register_engine(Engine("search", kind="search"))
    app.register_engine(Engine("tools", kind="tool"))
    return app


def make_graph(
    *specs: tuple[PrimOp, tuple[str, ...], tuple[str, ...]],
    inputs: tuple[str, ...] = ("query.question",),
    edges: tuple[tuple[int, int], ...] = (),
    **prim_args,
) -> Graph:
    """A small graph: each spec is (op, reads, writes); data edges are drawn automatically and
    `edges` adds extra (non-data) ones by position."""
    engines = {
        "llm": EngineInfo("vllm", Engine("llm", kind="vllm").ops, 8),
        "emb": EngineInfo("st", Engine("emb", kind="sentence_transformers").ops, 4),
        "db": EngineInfo("pgvector", Engine("db", kind="pgvector").ops, 4),
    }
    g = Graph(inputs=frozenset(inputs), engines=engines)
    prims = []
    for i, (op, reads, writes) in enumerate(specs):
        engine = {PrimOp.EMBEDDING: "emb", PrimOp.INGESTION: "db", PrimOp.SEARCHING: "db"}.get(op, "llm")
        if op in (PrimOp.AGGREGATE, PrimOp.CONDITION):
            engine = None
        args = dict(prim_args.get(f"p{i}", {}))
        prims.append(
            g.add(
                Primitive(
                    op,
                    engine,
                    f"c{i}",
                    inputs=reads,
                    outputs=writes,
                    args=args,
                    num_requests=args.pop("n", 1) if "n" in args else 1,
                )
            )
        )
    writers = g.producers()
    for p in prims:
        for k in p.inputs:
            if k in writers:
                g.connect(writers[k], p)
    for a, b in edges:
        g.connect(prims[a], prims[b])
    g.outputs = tuple(prims[-1].outputs)
    return g


def pending(qid: str, name: str, arrival: float, requests: list[dict], op: str, depth: int, **kw) -> Pending:
    """A queued entry of query `qid` for the scheduling policies' tests (more Pending fields as `kw`)."""
    return Pending(query_id=qid, name=name, op=op, depth=depth, arrival=arrival, requests=requests, **kw)
