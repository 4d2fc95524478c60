"""The engine adapters of the LlamaIndex baseline (bench/baselines/llamaindex_rag.py): LlamaIndex's own
interfaces over the SAME engine adapter instances teola drives, one engine call each. `EngineLLM` (a
`CustomLLM`; one chat or completion = one "decoding" request, system message -> the "system" prompt part, user
messages -> "user" parts), `EngineEmbedding` (a `BaseEmbedding`), `EngineVectorStore` (a
`BasePydanticVectorStore` over the pgvector adapter's "ingestion"/"searching" ops, one namespace per
query), `EngineReranker` (a `BaseNodePostprocessor`) and `ExpandedQueryRetriever` (LlamaIndex's
`QueryFusionRetriever` with one explicit expansion call). Only the async API is supported."""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engines.requests import PrimOp

with warnings.catch_warnings():  # llama-index-core's import may trip pydantic field warnings
    warnings.simplefilter("ignore")
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.base.llms.types import (
        ChatMessage,
        ChatResponse,
        CompletionResponse,
        LLMMetadata,
        MessageRole,
    )
    from llama_index.core.llms import CustomLLM
    from llama_index.core.llms.callbacks import (
        llm_chat_callback,
        llm_completion_callback,
    )
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.prompts import ChatPromptTemplate
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.schema import (
        BaseNode,
        MetadataMode,
        NodeWithScore,
        QueryBundle,
    )
    from llama_index.core.vector_stores.types import (
        BasePydanticVectorStore,
        VectorStoreQuery,
        VectorStoreQueryResult,
    )
    from llama_index.core.vector_stores.utils import (
        metadata_dict_to_node,
        node_to_metadata_dict,
    )
    from pydantic import PrivateAttr


_SYNC = (
    "{cls}: the synchronous API is not supported (the engine adapters run on the caller's event "
    "loop); use the async one (aquery, aretrieve, achat, acomplete)"
)
LIST_MARK = re.compile(r"^\s*(?:\(?\d{1,3}[.):]|[-*\u2022+])\s+")


# ---- engine calls, recorded per query -----------------------------------------------------------
class CallLog:
    """The engine calls of one query, as trace entries shaped like teola's per-primitive trace
    (seconds from the query's start; LlamaIndex calls an engine directly, so queued == started)."""

    def __init__(self, system: str = "llamaindex") -> None:
        self.t0 = time.perf_counter()
        self.system = system  # the entries' primitive names start with it
        self.entries: list[dict[str, Any]] = []

    def add(self, engine: str, op: str, n: int, started: float, result: list[Any]) -> None:
        entry: dict[str, Any] = {
            "primitive": f"{self.system}.{op}{len(self.entries)}",
            "op": op,
            "engine": engine,
            "status": "ok",
            "queued": started - self.t0,
            "started": started - self.t0,
            "finished": time.perf_counter() - self.t0,
            "batch_size": n,
        }
        if op == PrimOp.DECODING and result and isinstance(result[0], dict):
            for key in ("num_prompt_tokens", "num_cached_tokens", "num_output_tokens"):
                entry[key] = result[0].get(key, 0)
        self.entries.append(entry)


@dataclass(slots=True)
class EngineClient:
    """One engine adapter (anything with `async execute(op, requests)`), its name and a call log."""

    name: str
    backend: Any
    log: CallLog | None = None

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        started = time.perf_counter()
        result = await self.backend.execute(op, requests)
        self.record(op, len(requests), started, result)
        return result

    def record(self, op: str, n: int, started: float, result: list[Any]) -> None:
        if self.log is not None:
            self.log.add(self.name, op, n, started, result)

    def with_log(self, log: CallLog) -> EngineClient:
        return EngineClient(self.name, self.backend, log)


# ---- LlamaIndex components over the adapters -----------------------------------------------------
class EngineLLM(CustomLLM):
    """A LlamaIndex LLM whose every chat / completion is one "decoding" request to teola's vLLM
    adapter (greedy unless `temperature` is set)."""

    max_tokens: int = 128
    temperature: float = 0.0
    context_window: int = 2048
    model_name: str = "smollm2-135m-instruct"
    _client: EngineClient = PrivateAttr()

    def __init__(self, client: EngineClient, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._client = client

    @classmethod
    def class_name(cls) -> str:
        return "teola_engine_llm"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.max_tokens,
            is_chat_model=True,
            model_name=self.model_name,
        )

    async def _decode(self, parts: list[list[str]], **kwargs: Any) -> str:
        request = {
            "parts": parts,
            "complete": True,
            "max_tokens": kwargs.get("max_tokens", self.max_tokens),
            "temperature": kwargs.get("temperature", self.temperature),
            "stop": kwargs.get("stop"),
            "priority": 0,
            "split": kwargs.get("split"),
        }
        if kwargs.get("max_items"):  # a split call that ends once this many items are out
            request["max_items"] = kwargs["max_items"]
        (result,) = await self._client.execute("decoding", [request])
        return result["text"]

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        text = await self._decode(messages_to_parts(messages), **kwargs)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=await self._decode([["user", prompt]], **kwargs))

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        raise RuntimeError(_SYNC.format(cls=type(self).__name__))

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise RuntimeError(_SYNC.format(cls=type(self).__name__))

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise RuntimeError(_SYNC.format(cls=type(self).__name__))


def messages_to_parts(messages: Sequence[ChatMessage]) -> list[list[str]]:
    """A leading system message becomes the "system" part (the adapter renders it as the system
    turn); user messages become "user" parts, joined into one user turn. Other roles (a multi-turn
    history) are not representable as one request and raise ValueError."""
    parts = []
    for i, m in enumerate(messages):
        if m.role == MessageRole.SYSTEM and i == 0:
            parts.append(["system", m.content or ""])
        elif m.role == MessageRole.USER:
            parts.append(["user", m.content or ""])
        else:
            raise ValueError(
                f"EngineLLM takes a system message then user messages, got a {m.role.value!r} "
                f"message at position {i}"
            )
    return parts


class EngineEmbedding(BaseEmbedding):
    """A LlamaIndex embedding model over teola's embedding adapter (one request per text, each
    `embed_batch_size` batch in one engine call)."""

    _client: EngineClient = PrivateAttr()

    def __init__(self, client: EngineClient, **kwargs: Any) -> None:
        super().__init__(**{"model_name": "all-minilm-l6-v2", **kwargs})
        self._client = client

    @classmethod
    def class_name(cls) -> str:
        return "teola_engine_embedding"

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await self._client.execute("embedding", [{"text": t} for t in texts])

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return (await self._aget_text_embeddings([text]))[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return (await self._aget_text_embeddings([query]))[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        raise RuntimeError(_SYNC.format(cls=type(self).__name__))

    def _get_query_embedding(self, query: str) -> list[float]:
        raise RuntimeError(_SYNC.format(cls=type(self).__name__))


class EngineVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store over teola's pgvector adapter, confined to one namespace. Nodes are
    stored as text + embedding + LlamaIndex's node metadata dict; `aclear()` drops the namespace."""

    stores_text: bool = True
    namespace: str
    _client: EngineClient = PrivateAttr()

    def __init__(self, client: EngineClient, namespace: str, **kwargs: Any) -> None:
        super().__init__(namespace=namespace, **kwargs)
        self._client = client

    @classmethod
    def class_name(cls) -> str:
        return "teola_engine_vector_store"

    @property
    def client(self) -> Any:
        return self._client.backend

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        requests = [
            {
                "namespace": self.namespace,
                "text": n.get_content(metadata_mode=MetadataMode.NONE),
                "embedding": n.get_embedding(),
                "meta": node_to_metadata_dict(n, remove_text=True),
            }
            for n in nodes
        ]
        if requests:
            await self._client.execute("ingestion", requests)
        return [n.node_id for n in nodes]

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        if query.query_embedding is None:
            raise ValueError("EngineVectorStore: the query has no embedding (only dense search is supported)")
        (hits,) = await self._client.execute(
            "searching",
            [
                {
                    "namespace": self.namespace,
                    "embedding": list(query.query_embedding),
                    "top_k": query.similarity_top_k,
                }
            ],
        )
        nodes = [metadata_dict_to_node(h["meta"], text=h["text"]) for h in hits]
        return VectorStoreQueryResult(
            nodes=nodes, similarities=[h["score"] for h in hits], ids=[n.node_id for n in nodes]
        )

    async def aclear(self) -> None:
        await self._client.backend.drop_namespace(self.namespace)

    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        raise RuntimeError(_SYNC.format(cls=type(self).__name__))

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        raise RuntimeError(_SYNC.format(cls=type(self).__name__))

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        raise NotImplementedError("EngineVectorStore deletes whole namespaces only: use aclear()")


class EngineReranker(BaseNodePostprocessor):
    """A LlamaIndex node postprocessor scoring (query, node text) pairs with teola's reranker
    adapter in one call and keeping the `top_n` best.

    `RetrieverQueryEngine.aquery` (llama-index-core 0.14) awaits `apostprocess_nodes`, which awaits
    `execute("reranking", ...)`; the synchronous `postprocess_nodes` (LlamaIndex's blocking query path)
    calls the adapter's blocking `score`, as LlamaIndex's own in-process rerankers do."""

    top_n: int = 3
    _client: EngineClient = PrivateAttr()

    def __init__(self, client: EngineClient, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._client = client

    @classmethod
    def class_name(cls) -> str:
        return "teola_engine_reranker"

    def _pairs(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> list[tuple[str, str]]:
        if query_bundle is None:
            raise ValueError("EngineReranker needs the query")
        return [(query_bundle.query_str, n.node.get_content()) for n in nodes]

    def _best(self, nodes: list[NodeWithScore], scores: list[float]) -> list[NodeWithScore]:
        ranked = sorted(zip(scores, nodes), key=lambda p: -float(p[0]))[: self.top_n]
        return [NodeWithScore(node=n.node, score=float(s)) for s, n in ranked]

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        pairs = self._pairs(nodes, query_bundle)
        if not pairs:
            return []
        scores = await self._client.execute("reranking", [{"query": q, "text": t} for q, t in pairs])
        return self._best(nodes, scores)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        pairs = self._pairs(nodes, query_bundle)
        if not pairs:
            return []
        started = time.perf_counter()
        scores = self._client.backend.score(pairs)
        self._client.record("reranking", len(pairs), started, scores)
        return self._best(nodes, scores)


class ExpandedQueryRetriever(QueryFusionRetriever):
    """LlamaIndex's fusion retriever with the query generation awaited: one LLM call writes
    `num_queries` search queries with the teola expansion prompt; each, and the question itself, is retrieved
    concurrently by the wrapped retrievers and the results are fused (LlamaIndex's own code for both)."""

    def __init__(
        self,
        retriever: Any,
        expander: EngineLLM,
        num_queries: int,
        top_k: int,
        system: str,
        task: str,
        library_prompt: bool = False,
    ) -> None:
        # num_queries counts the original query in the library: ask it for `num_queries` new ones
        super().__init__(
            [retriever],
            llm=expander,
            mode="simple",
            similarity_top_k=top_k,
            num_queries=num_queries + 1,
            use_async=True,
        )
        self._library_prompt = library_prompt
        self._expand = ChatPromptTemplate(
            [
                ChatMessage(role=MessageRole.SYSTEM, content=system),
                ChatMessage(role=MessageRole.USER, content="Question:\n\n{query}\n\n" + task),
            ]
        )

    async def aexpand(self, question: str) -> list[QueryBundle]:
        if self._library_prompt:  # the library's own query-generation prompt, as `_get_queries` formats it
            prompt = self.query_gen_prompt.format(num_queries=self.num_queries - 1, query=question)
            text = (await self._llm.acomplete(prompt)).text
        else:
            text = await self._llm.apredict(self._expand, query=question)
        lines = [LIST_MARK.sub("", line).strip() for line in text.strip("`").split("\n")]
        queries = [q for q in lines if q][: self.num_queries - 1]
        # the original question first, as the library's fusion retriever (and teola) search it too
        return [QueryBundle(question)] + [QueryBundle(q) for q in queries]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        results = await self._run_async_queries(await self.aexpand(query_bundle.query_str))
        return self._simple_fusion(results)[: self.similarity_top_k]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        raise RuntimeError(_SYNC.format(cls=type(self).__name__))
