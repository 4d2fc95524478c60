"""Indexing (chunking -> Embedding [+ Ingestion]) and ingestion components."""

from __future__ import annotations

from teola.compile.components.context import BuildContext, Port
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive


def decompose_indexing(ctx: BuildContext) -> None:
    """Chunk the query's documents (token-aware windows) and embed every chunk. With config
    `vectordb: <engine>` the ingestion is part of this component too."""
    chunks_key = ctx.key("chunks")
    chunks = ctx.initial[chunks_key]  # prepared by teola.compile.decompose.prepare_inputs
    n = len(chunks)
    emb = ctx.add(
        Primitive(
            PrimOp.EMBEDDING,
            ctx.engine(),
            ctx.node.name,
            inputs=(chunks_key,),
            outputs=(ctx.key("embeddings"),),
            args={"map": (chunks_key,)},
            num_requests=n,
            label="embed",
        )
    )
    if ctx.node.anno == "batchable":
        emb.args["batchable"] = True
    # the bound, not the longest chunk of these documents: cached graphs serve other documents
    size = ctx.config.get("chunk_size", 256)
    ctx.sub.exports.update(chunks=Port(chunks_key, n, size), chunk_embeddings=Port(emb.outputs[0], n))
    if ctx.config.get("vectordb"):
        add_ingestion(ctx, ctx.config["vectordb"], chunks_key, emb.outputs[0], n, size)


def decompose_ingestion(ctx: BuildContext) -> None:
    """Write the upstream chunks and their embeddings into the vector store."""
    chunks = ctx.find("chunks")
    embs = ctx.find("chunk_embeddings")
    add_ingestion(ctx, ctx.engine(), chunks.key, embs.key, chunks.n, chunks.item_tokens)


def add_ingestion(
    ctx: BuildContext, engine: str, chunks_key: str, emb_key: str, n: int, item_tokens: int = 0
) -> None:
    p = ctx.add(
        Primitive(
            PrimOp.INGESTION,
            engine,
            ctx.node.name,
            inputs=(emb_key, chunks_key, "sys.namespace"),
            outputs=(ctx.key("index"),),
            args={"map": (emb_key, chunks_key)},
            num_requests=n,
            label="ingest",
        )
    )
    if ctx.node.anno == "batchable":
        p.args["batchable"] = True
    ctx.sub.exports["index"] = Port(p.outputs[0], n, item_tokens)
