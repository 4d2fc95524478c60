"""The LangGraph baseline of document-QA RAG with its LLM behind an OpenAI-compatible server: the graph
a LangGraph user writes, its LLM calls through LangChain's `ChatOpenAI` (the official `openai` client)
to the SAME `vllm serve` process teola's remote engine uses, its other steps on the SAME engine
adapter instances as teola (MiniLM embedder, pgvector, reranker).

The graph (langgraph `StateGraph`, run with `ainvoke`; its nodes in one super-step run concurrently):

    START -> ingest ------------------------> retrieve -> rerank -> synthesize -> END
    START -> expand (advanced RAG only) ---/

- ingest: the documents chunked with the template's chunk size and overlap, counted in the embedding
  model's tokens (`teola.compile.chunking`, as teola and the LlamaIndex baseline count them:
  LangChain's splitters are a separate package), embedded in one call, stored in a fresh namespace;
- expand: one `ChatOpenAI` call with teola's expansion prompt, one query per line;
- retrieve: the question and the expanded queries embedded in one call and searched concurrently
  (top_k each), fused by chunk text keeping the best score (what LlamaIndex's "simple" fusion does);
- rerank: one reranker call over the fused chunks, the best `top_n` kept (skipped without rerank);
- synthesize: one `ChatOpenAI` call with teola's QA prompt over the kept chunks (compact synthesis:
  the template's 3 chunks fit in one prompt; other modes are refused).

Token counts come from the server's `usage` (the `AIMessage.usage_metadata` ChatOpenAI fills)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypedDict

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph

from bench.baselines.llamaindex_engines import LIST_MARK, CallLog, EngineClient
from bench.baselines.llamaindex_rag import Answer, RAGSpec, app_chunk_tokenizer
from engines.llm_text.llm_requests import PART_SEPARATOR
from teola.compile.chunking import chunk_text
from teola.compile.components import prompts


class RAGState(TypedDict, total=False):
    question: str
    documents: list
    namespace: str
    queries: list
    ingested: int
    hits: list
    context: list
    answer: str


Node = Callable[[RAGState], Awaitable[RAGState]]  # one step of the graph: the state in, its updates out


def merge_hits(found: list[Any]) -> list[str]:
    """The texts the searches found (one result list per query), each once with its best score, best first."""
    best: dict[str, float] = {}
    for (hits,) in found:
        for h in hits:
            best[h["text"]] = max(best.get(h["text"], float("-inf")), float(h["score"]))
    return sorted(best, key=lambda t: -best[t])


def wire(spec: RAGSpec, ingest: Node, expand: Node, retrieve: Node, rerank: Node, synthesize: Node) -> Any:
    """The template as a LangGraph graph of these nodes: ingestion (beside the expansion when the spec asks
    for queries), retrieval, reranking (when it keeps a top n) and synthesis."""
    g = StateGraph(RAGState)
    g.add_node("ingest", ingest)
    g.add_node("retrieve", retrieve)
    g.add_node("synthesize", synthesize)
    g.add_edge(START, "ingest")
    if spec.num_queries:
        g.add_node("expand", expand)
        g.add_edge(START, "expand")
        g.add_edge(["ingest", "expand"], "retrieve")
    else:
        g.add_edge("ingest", "retrieve")
    if spec.top_n:
        g.add_node("rerank", rerank)
        g.add_edge("retrieve", "rerank")
        g.add_edge("rerank", "synthesize")
    else:
        g.add_edge("retrieve", "synthesize")
    g.add_edge("synthesize", END)
    return g.compile()


class LangGraphRAG:
    """Runs a document-QA RAG app as a LangGraph graph: `ChatOpenAI` at `base_url` (an OpenAI-compatible
    server's `/v1`) for the LLM calls, `backends` ("embedding", "vectordb", "reranker" when the template
    reranks) for the rest."""

    def __init__(
        self,
        backends: dict[str, Any],
        spec: RAGSpec,
        base_url: str,
        model: str,
        chunk_tokens_in: Any = None,
        api_key: str = "EMPTY",
    ) -> None:
        need = {"embedding", "vectordb"} | ({"reranker"} if spec.top_n else set())
        missing = need - set(backends)
        if missing:
            raise ValueError(f"LangGraphRAG needs engine adapters for {sorted(missing)}")
        if spec.mode != "compact":
            raise ValueError(
                f"LangGraphRAG writes compact synthesis only (one call over the kept chunks), "
                f"not {spec.mode!r}"
            )
        self.spec, self.tokenizer = spec, chunk_tokens_in
        self.clients = {name: EngineClient(name, b) for name, b in backends.items() if name != "llm"}
        # the openai client's own retries would hide a failed call's time; a failed query is counted instead
        common = {
            "base_url": base_url,
            "api_key": api_key,
            "model": model,
            "temperature": 0.0,
            "max_retries": 0,
        }
        self.llm = ChatOpenAI(max_tokens=spec.max_tokens, **common)
        self.expander = ChatOpenAI(max_tokens=spec.expansion_max_tokens, **common)

    @classmethod
    def from_app(
        cls, app: Any, base_url: str, model: str, nodes: dict[str, dict[str, Any]] | None = None
    ) -> LangGraphRAG:
        """The graph for a started teola app, on that app's adapters (instance 0 of each engine)."""
        if app.runtime is None:
            raise ValueError(f"app {app.name!r} is not started: await app.start() first")
        backends = {name: insts[0].handle for name, insts in app.runtime.instances.items() if insts}
        return cls(
            backends,
            RAGSpec.from_template(app.nodes, nodes),
            base_url,
            model,
            app_chunk_tokenizer(app, nodes),
        )

    async def _chat(self, model: ChatOpenAI, messages: list[BaseMessage], log: CallLog) -> str:
        started = time.perf_counter()
        reply = await model.ainvoke(messages)
        usage = reply.usage_metadata or {}
        log.add(
            "llm",
            "decoding",
            1,
            started,
            [
                {
                    "num_prompt_tokens": usage.get("input_tokens", 0),
                    "num_output_tokens": usage.get("output_tokens", 0),
                    "num_cached_tokens": (usage.get("input_token_details") or {}).get("cache_read", 0),
                }
            ],
        )
        return str(reply.content)

    def graph(self, log: CallLog) -> Any:
        spec = self.spec
        c = {name: client.with_log(log) for name, client in self.clients.items()}

        async def ingest(s: RAGState) -> RAGState:
            texts = [d if isinstance(d, str) else d["text"] for d in s["documents"]]
            chunks = [
                ch for t in texts for ch in chunk_text(t, spec.chunk_size, spec.chunk_overlap, self.tokenizer)
            ]
            vectors = await c["embedding"].execute("embedding", [{"text": ch} for ch in chunks])
            await c["vectordb"].execute(
                "ingestion",
                [{"namespace": s["namespace"], "text": ch, "embedding": v} for ch, v in zip(chunks, vectors)],
            )
            return {"ingested": len(chunks)}

        async def expand(s: RAGState) -> RAGState:
            task = "Question:\n\n" + s["question"] + "\n\n" + spec.instructions["expansion_task"]
            text = await self._chat(
                self.expander, [SystemMessage(spec.instructions["expansion_system"]), HumanMessage(task)], log
            )
            lines = [LIST_MARK.sub("", line).strip() for line in text.strip("`").split("\n")]
            return {"queries": [q for q in lines if q][: spec.num_queries]}

        async def retrieve(s: RAGState) -> RAGState:
            queries = [s["question"], *s.get("queries", [])]
            vectors = await c["embedding"].execute("embedding", [{"text": q} for q in queries])
            found = await asyncio.gather(
                *(
                    c["vectordb"].execute(
                        "searching", [{"namespace": s["namespace"], "embedding": v, "top_k": spec.top_k}]
                    )
                    for v in vectors
                )
            )
            ranked = merge_hits(found)
            return {"hits": ranked, "context": ranked[: spec.top_k]}

        async def rerank(s: RAGState) -> RAGState:
            scores = await c["reranker"].execute(
                "reranking", [{"query": s["question"], "text": t} for t in s["hits"]]
            )
            ranked = sorted(zip(scores, s["hits"]), key=lambda p: -float(p[0]))[: spec.top_n]
            return {"context": [t for _, t in ranked]}

        async def synthesize(s: RAGState) -> RAGState:
            parts = prompts.qa_parts(s["question"], "\n\n".join(s["context"]), spec.instructions["qa"])
            text = await self._chat(
                self.llm, [HumanMessage(PART_SEPARATOR.join(t for _, t in parts if t))], log
            )
            return {"answer": text}

        return wire(spec, ingest, expand, retrieve, rerank, synthesize)

    async def aquery(self, question: str, documents: Sequence[str | dict[str, Any]]) -> Answer:
        """Ingest `documents` into a fresh namespace, answer `question` from them, drop the namespace."""
        log = CallLog("langgraph")
        namespace = f"langgraph-{uuid.uuid4().hex[:12]}"
        try:
            out = await self.graph(log).ainvoke(
                {"question": question, "documents": list(documents), "namespace": namespace}
            )
            return Answer(
                out.get("answer", ""), list(out.get("context", [])), log.entries, time.perf_counter() - log.t0
            )
        finally:
            await asyncio.shield(self.clients["vectordb"].backend.drop_namespace(namespace))
