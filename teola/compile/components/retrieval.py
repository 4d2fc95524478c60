"""Query embedding, vector search, reranking and search-engine components."""

from __future__ import annotations

from engines.requests import REQUEST_DEFAULTS
from teola.compile.components.context import BuildContext, Port
from teola.compile.components.options import WEB_SEARCH_TOP_K
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive


def decompose_query_embedding(ctx: BuildContext) -> None:
    """Embed the upstream queries (e.g. expanded ones), or the question itself if none. With
    upstream queries the question is embedded too and searched alongside them (config
    `include_question`, default true, as LlamaIndex's fusion retriever does)."""
    src = ctx.find_optional("queries")
    key, n = (src.key, src.n) if src else (ctx.question(), 1)
    p = ctx.add(
        Primitive(
            PrimOp.EMBEDDING,
            ctx.engine(),
            ctx.node.name,
            inputs=(key,),
            outputs=(ctx.key("embeddings"),),
            args={"map": (key,)},
            num_requests=n,
            label="embed",
        )
    )
    if ctx.node.anno == "batchable":
        p.args["batchable"] = True
    ctx.sub.exports["query_embeddings"] = Port(p.outputs[0], n)
    include = ctx.config.get("include_question", True)
    if not isinstance(include, bool):
        raise ValueError(
            f"node {ctx.node.name!r}: config 'include_question' must be true or false, got {include!r}"
        )
    if src and include:
        q = ctx.add(
            Primitive(
                PrimOp.EMBEDDING,
                ctx.engine(),
                ctx.node.name,
                inputs=(ctx.question(),),
                outputs=(ctx.key("question_embedding"),),
                args={"map": (ctx.question(),)},
                num_requests=1,
                label="embed_question",
            )
        )
        ctx.sub.exports["question_embedding"] = Port(q.outputs[0], 1)


def decompose_vector_search(ctx: BuildContext) -> None:
    """Top-k search for each query embedding, after the documents are ingested; the question's own
    search (when the query embedding offers one) comes first in the results."""
    q = ctx.find("query_embeddings")
    question = ctx.find_optional("question_embedding")
    index = ctx.find("index")
    top_k = ctx.int_config("top_k", REQUEST_DEFAULTS["top_k"])
    out = ctx.key("results")
    searches = [(question, "question_results", "search_question")] if question else []
    searches.append((q, "query_results" if question else "results", "search"))
    keys = []
    for port, name, label in searches:
        p = ctx.add(
            Primitive(
                PrimOp.SEARCHING,
                ctx.engine(),
                ctx.node.name,
                inputs=(port.key, index.key, "sys.namespace"),
                outputs=(ctx.key(name),),
                args={"map": (port.key,), "top_k": top_k, "own_namespace": ctx.own_namespace},
                num_requests=port.n,
                label=label,
            )
        )
        keys.append(p.outputs[0])
    if question:
        ctx.add(
            Primitive(
                PrimOp.AGGREGATE,
                None,
                ctx.node.name,
                inputs=tuple(keys),
                outputs=(out,),
                args={"mode": "concat"},
                label="gather",
            )
        )
    n = q.n + (1 if question else 0)
    # a search returns at most as many hits as the query indexed chunks (when it indexes its own)
    per_query = min(top_k, index.n) if index.n > 0 else top_k
    # Without a reranker, the retrieved texts (flattened in query order) are the context.
    ctx.sub.exports.update(
        results=Port(out, n, index.item_tokens), context=Port(out, n * per_query, index.item_tokens)
    )


def decompose_rerank(ctx: BuildContext) -> None:
    """Score every retrieved chunk against the question and keep the best `top_n`."""
    results = ctx.find("results")
    top_n = ctx.int_config("top_n", 3)
    context = ctx.find("context")
    p = ctx.add(
        Primitive(
            PrimOp.RERANKING,
            ctx.engine(),
            ctx.node.name,
            inputs=(ctx.question(), results.key),
            outputs=(ctx.key("context"),),
            args={"top_n": top_n},
            num_requests=max(1, context.n),
            label="rerank",
        )
    )
    ctx.sub.exports["context"] = Port(p.outputs[0], min(top_n, max(1, context.n)), results.item_tokens)


def decompose_web_search(ctx: BuildContext) -> None:
    """Search-engine lookup of the question (or upstream queries); results become context."""
    src = ctx.find_optional("queries")
    key, n = (src.key, src.n) if src else (ctx.question(), 1)
    top_k = ctx.int_config("top_k", WEB_SEARCH_TOP_K)
    p = ctx.add(
        Primitive(
            PrimOp.SEARCHING,
            ctx.engine(),
            ctx.node.name,
            inputs=(key,),
            outputs=(ctx.key("results"),),
            args={"map": (key,), "top_k": top_k, "text_query": True},
            num_requests=n,
            label="search",
        )
    )
    ctx.sub.exports.update(results=Port(p.outputs[0], n))
    # A flat context list: the runtime flattens search results into texts for prompts.
    ctx.sub.exports["context"] = Port(p.outputs[0], n * top_k)
