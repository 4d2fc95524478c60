"""The LlamaIndex baseline: naive and advanced RAG written with the real LlamaIndex library
(`llama-index-core`, the optional `llamaindex` dependency group), driving the SAME engine adapter
instances as teola and the LlamaDist baselines.

What is LlamaIndex (its own code, unchanged): `SentenceSplitter` chunking, `IngestionPipeline.arun`
(chunk -> embed in `embed_batch_size` batches -> vector store add), `VectorStoreIndex` and its
`VectorIndexRetriever`, `QueryFusionRetriever`'s concurrent multi-query retrieval and "simple" fusion
(dedupe, keep the best score), `RetrieverQueryEngine.aquery` applying node postprocessors then a
response synthesizer from `get_response_synthesizer` (`refine`, `compact` or `tree_summarize`, its
`PromptHelper` repacking chunks to the context window), its prompt templates, `Settings`, callbacks and
instrumentation. Everything runs on LlamaIndex's async path (`aquery`), reranking included
(llama-index-core 0.14's query engine awaits its postprocessors), so concurrent queries overlap.

What is ours (thin adapters, one engine call each): `EngineLLM` (a `CustomLLM`; one chat or completion
= one "decoding" request to the vLLM adapter, system message -> the "system" prompt part, user
messages -> "user" parts, rendered with the model's chat template by the adapter), `EngineEmbedding`
(a `BaseEmbedding` over the embedding adapter), `EngineVectorStore` (a `BasePydanticVectorStore` over
the pgvector adapter's "ingestion"/"searching" ops, one namespace per query, `aclear()` drops it) and
`EngineReranker` (a `BaseNodePostprocessor` over the reranker adapter). The prompt texts are teola's
templates' (`teola.compile.components.prompts`) in the same layout (`prompts.qa_parts`: one user turn, the
context, an existing answer, the instruction, the question), so both sides send the same prompts; with
`RAGSpec.prompts = "library"` LlamaIndex uses its own default templates instead (its chat QA, refine
and summary prompts, and its fusion retriever's query-generation prompt). Query expansion is one
explicit LLM call with the teola expansion prompt: `ExpandedQueryRetriever` overrides only that
step of LlamaIndex's `QueryFusionRetriever` (so the prompt is teola's, or with library prompts the
library's own query-generation prompt) and searches the original question alongside the expanded
queries (as the library and teola do), with the library's fusion.

Mapping of the teola templates: chunk_size / chunk_overlap -> SentenceSplitter (sizes counted in the
tokens teola's chunker counts: the embedding model's tokenizer, `teola.compile.chunk_tokenizer`, so
both split documents alike; the library's own default would be tiktoken's gpt-3.5 encoding);
search top_k -> similarity_top_k per query; rerank top_n -> the postprocessor; synthesis mode compact / refine
/ tree -> response_mode compact / refine / tree_summarize (LlamaIndex packs chunks to fill the context window,
so 3 short chunks take one call where teola's tree makes a leaf call per chunk plus a merge); max_tokens per
call as the templates set. Nothing here opens a network connection: the tokenizer is the model's local one and
the NLTK data LlamaIndex needs is in its package (`llama_index/core/_static`);
`Settings.llm`/`embed_model`/`tokenizer` are set to the objects here so no default (OpenAI) is ever resolved.

Only the async API is supported (`aquery`, `achat`, ...): the adapters live on the caller's event loop
(the synchronous methods raise, except the reranker's, which calls the adapter's blocking `score`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

with warnings.catch_warnings():  # llama-index-core's import may trip pydantic field warnings
    warnings.simplefilter("ignore")
    from llama_index.core import Settings, VectorStoreIndex, get_response_synthesizer
    from llama_index.core.base.llms.types import (
        ChatMessage,
        MessageRole,
    )
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.prompts import ChatPromptTemplate
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.schema import (
        Document,
    )

import engines.openai.llm as remote_llm
from bench.baselines.llamaindex_engines import (  # noqa: E402
    CallLog,
    EngineClient,
    EngineEmbedding,
    EngineLLM,
    EngineReranker,
    EngineVectorStore,
    ExpandedQueryRetriever,
)
from teola.compile.chunk_tokenizer import ModelTokenizer, chunk_tokenizer
from teola.compile.chunking import count_tokens
from teola.compile.components import prompts

RESPONSE_MODES = {"compact": "compact", "refine": "refine", "tree": "tree_summarize"}


# ---- the pipelines ------------------------------------------------------------------------------
@dataclass(slots=True)
class RAGSpec:
    """What one app's LlamaIndex pipeline does, read off the teola template (see `from_template`)."""

    chunk_size: int = 256
    chunk_overlap: int = 30
    top_k: int = 3
    mode: str = "tree"
    max_tokens: int = 128
    num_queries: int = 0  # 0: no query expansion
    expansion_max_tokens: int = 72
    top_n: int = 0  # 0: no reranking
    instructions: dict[str, str] = field(default_factory=dict)
    prompts: str = "teola"  # "teola": teola's prompt texts; "library": LlamaIndex's defaults

    @classmethod
    def from_template(
        cls, nodes: Sequence[Any], overrides: dict[str, dict[str, Any]] | None = None
    ) -> RAGSpec:
        """From a teola app's template nodes (`app.nodes`), with per-node-name config overrides as in
        a query config's "nodes" (e.g. {"synthesis": {"max_tokens": 16}})."""
        cfg = {n.kind: {**n.config, **(overrides or {}).get(n.name, {})} for n in nodes}
        unknown = set(cfg) - {
            "indexing",
            "ingestion",
            "query_embedding",
            "search",
            "rerank",
            "synthesis",
            "query_expansion",
        }
        if unknown:
            raise ValueError(
                f"the LlamaIndex baseline covers document-QA RAG templates; unsupported components "
                f"{sorted(unknown)}"
            )
        idx, synth, exp = cfg.get("indexing", {}), cfg.get("synthesis", {}), cfg.get("query_expansion")
        mode = synth.get("mode", "compact")  # teola's synthesis default
        if mode not in RESPONSE_MODES:
            raise ValueError(
                f"synthesis mode {mode!r} has no LlamaIndex counterpart; use one of {sorted(RESPONSE_MODES)}"
            )
        n_q = int(exp.get("num_queries", 3)) if exp is not None else 0
        return cls(
            chunk_size=int(idx.get("chunk_size", 256)),
            chunk_overlap=int(idx.get("chunk_overlap", 30)),
            top_k=int(cfg.get("search", {}).get("top_k", 16)),
            mode=mode,
            max_tokens=int(synth.get("max_tokens", 128)),
            num_queries=n_q,
            expansion_max_tokens=int((exp or {}).get("max_tokens", 24 * n_q)),
            top_n=int(cfg["rerank"].get("top_n", 3)) if "rerank" in cfg else 0,
            instructions={
                "qa": synth.get("instruction", prompts.QA),
                "refine": synth.get("refine_instruction", prompts.REFINE),
                "expansion_system": (exp or {}).get("instruction", prompts.EXPANSION_SYSTEM),
                "expansion_task": (exp or {}).get("task", prompts.EXPANSION).replace("{n}", str(n_q)),
            },
        )


@dataclass(slots=True)
class Answer:
    """One query's answer, the chunks it was synthesized from, its engine calls and the seconds from
    the call to the answer (the namespace is dropped after that, as teola does after a query)."""

    text: str
    sources: list[str]
    trace: list[dict[str, Any]]
    seconds: float


def chunk_tokens(text: str) -> list[None]:
    """As many items as words and punctuation marks in `text`: teola's chunker's fallback count
    (SentenceSplitter only takes len())."""
    return [None] * count_tokens(text)


def model_chunk_tokens(tokenizer: ModelTokenizer) -> Any:
    """A SentenceSplitter tokenizer counting in `tokenizer`'s tokens, as teola's chunker does."""
    return lambda text: [None] * tokenizer.count(text)


def app_chunk_tokenizer(
    app: Any, overrides: dict[str, dict[str, Any]] | None = None
) -> ModelTokenizer | None:
    """What the app's indexing node counts chunk tokens in (None: words and punctuation marks)."""
    index = next((n for n in app.nodes if n.kind == "indexing"), None)
    if index is None:
        return None
    choice = {**index.config, **(overrides or {}).get(index.name, {})}.get("tokenizer") or "engine"
    return chunk_tokenizer(app.engines.get(index.engine), choice)


def _teola_template(instruction: str, context: str, existing: str | None = None) -> ChatPromptTemplate:
    """teola's synthesis prompt (`prompts.qa_parts`) as a LlamaIndex chat template with its template
    variables: a leading system part becomes the system message, the rest the user message, joined
    as the vLLM adapter joins parts."""
    from engines.llm_text.llm_requests import PART_SEPARATOR, SYSTEM_PART_NAMES

    parts = prompts.qa_parts("{query_str}", context, instruction, existing)
    messages = []
    if parts[0][0] in SYSTEM_PART_NAMES:
        messages.append(ChatMessage(role=MessageRole.SYSTEM, content=parts.pop(0)[1]))
    user = PART_SEPARATOR.join(text for _, text in parts if text)
    return ChatPromptTemplate(messages + [ChatMessage(role=MessageRole.USER, content=user)])


class LlamaIndexRAG:
    """Runs a RAG app with LlamaIndex over teola's engine adapters. `backends` maps the engine names
    "llm", "embedding", "vectordb" and (for reranking) "reranker" to started adapters."""

    def __init__(
        self, backends: dict[str, Any], spec: RAGSpec, chunk_tokens_in: ModelTokenizer | None = None
    ) -> None:
        need = {"llm", "embedding", "vectordb"} | ({"reranker"} if spec.top_n else set())
        missing = need - set(backends)
        if missing:
            raise ValueError(f"LlamaIndexRAG needs engine adapters for {sorted(missing)}")
        self.spec = spec
        self.clients = {name: EngineClient(name, b) for name, b in backends.items()}
        llm_backend = backends["llm"]
        renderer = getattr(llm_backend, "renderer", None)
        if renderer is None:
            raise ValueError("the llm adapter is not started (no tokenizer yet): start the engines first")
        tokenizer = renderer.tokenizer
        self.context_window = int(getattr(llm_backend, "max_model_len", 2048))
        # an LLM behind an OpenAI-compatible server is called with LlamaIndex's own OpenAILike
        # (bench.baselines.llamaindex_server; its package is needed only then)
        self.server = (
            (f"{llm_backend.base_url}/v1", llm_backend.model)
            if isinstance(llm_backend, remote_llm.OpenAILLMEngine)
            else None
        )
        self.tokenize = lambda text: tokenizer.encode(text, add_special_tokens=False)
        # Chunk sizes count tokens the way teola's chunker does (`chunk_tokens_in`: the embedding
        # model's; words without it), so both index alike; prompts are fitted to the context window
        # with the LLM's own tokenizer.
        counter = chunk_tokens if chunk_tokens_in is None else model_chunk_tokens(chunk_tokens_in)
        self.splitter = SentenceSplitter(
            chunk_size=spec.chunk_size, chunk_overlap=spec.chunk_overlap, tokenizer=counter
        )
        # Every LlamaIndex default points at our objects, so nothing falls back to OpenAI / tiktoken.
        Settings.tokenizer = self.tokenize
        Settings.llm = self._llm(self.clients["llm"], spec.max_tokens)
        Settings.embed_model = EngineEmbedding(self.clients["embedding"])
        Settings.node_parser = self.splitter
        Settings.context_window = self.context_window

    @classmethod
    def from_app(
        cls, app: Any, nodes: dict[str, dict[str, Any]] | None = None, prompts: str = "teola"
    ) -> LlamaIndexRAG:
        """The pipeline for a started teola app, on that app's engine adapters (instance 0 of each);
        `prompts`: "teola" (teola's prompt texts) or "library" (LlamaIndex's default templates)."""
        if app.runtime is None:
            raise ValueError(f"app {app.name!r} is not started: await app.start() first")
        if prompts not in ("teola", "library"):
            raise ValueError(f"prompts must be 'teola' or 'library', got {prompts!r}")
        backends = {name: insts[0].handle for name, insts in app.runtime.instances.items() if insts}
        spec = RAGSpec.from_template(app.nodes, nodes)
        spec.prompts = prompts
        return cls(backends, spec, app_chunk_tokenizer(app, nodes))

    def _llm(self, client: EngineClient, max_tokens: int) -> Any:
        if self.server is not None:
            import bench.baselines.llamaindex_server as llamaindex_server

            return llamaindex_server.server_llm(self.server, client.record, max_tokens, self.context_window)
        return EngineLLM(client, max_tokens=max_tokens, context_window=self.context_window)

    async def aquery(self, question: str, documents: Sequence[str | dict[str, Any]]) -> Answer:
        """Ingest `documents` into a fresh namespace, answer `question` from them, drop the namespace."""
        log = CallLog()
        c = {name: client.with_log(log) for name, client in self.clients.items()}
        spec = self.spec
        embed = EngineEmbedding(c["embedding"])
        store = EngineVectorStore(c["vectordb"], namespace=f"llamaindex-{uuid.uuid4().hex[:12]}")
        try:
            docs = [Document(text=d if isinstance(d, str) else d["text"]) for d in documents]
            await IngestionPipeline(
                transformations=[self.splitter, embed], vector_store=store, disable_cache=True
            ).arun(documents=docs)
            index = VectorStoreIndex.from_vector_store(store, embed_model=embed)
            retriever = index.as_retriever(similarity_top_k=spec.top_k)
            if spec.num_queries:
                retriever = ExpandedQueryRetriever(
                    retriever,
                    self._llm(c["llm"], spec.expansion_max_tokens),
                    spec.num_queries,
                    spec.top_k * spec.num_queries,
                    spec.instructions["expansion_system"],
                    spec.instructions["expansion_task"],
                    library_prompt=spec.prompts == "library",
                )
            post = [EngineReranker(c["reranker"], top_n=spec.top_n)] if spec.top_n else []
            templates: dict[str, Any] = {}
            if spec.prompts != "library":
                # the layout of teola's synthesis prompts (teola.compile.components.prompts.qa_parts)
                qa = _teola_template(spec.instructions["qa"], "{context_str}")
                templates = {
                    "text_qa_template": qa,
                    "summary_template": qa,
                    "refine_template": _teola_template(
                        spec.instructions["refine"], "{context_msg}", "{existing_answer}"
                    ),
                }
            synth = get_response_synthesizer(
                llm=self._llm(c["llm"], spec.max_tokens),
                response_mode=RESPONSE_MODES[spec.mode],
                use_async=True,
                **templates,
            )
            engine = RetrieverQueryEngine(retriever, response_synthesizer=synth, node_postprocessors=post)
            response = await engine.aquery(question)
            return Answer(
                str(response.response or ""),
                [n.node.get_content() for n in response.source_nodes],
                log.entries,
                time.perf_counter() - log.t0,
            )
        finally:
            await asyncio.shield(store.aclear())
