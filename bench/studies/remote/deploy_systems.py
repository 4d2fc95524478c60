"""The systems of the deployment study (bench/studies/remote/deploy.py) and one query of each, at equal work.

Every system sends its LLM calls to its OWN emulated GPU vLLM server (`teola emulate`, same profile,
same settings), so no system warms another's prefix cache; the embedder, reranker and pgvector are
the SAME in-process engine adapters for all three (teola's MiniLM, reranker and embedded pgvector).

- teola: the shipped apps with `Engine("llm", kind="openai", url=<its server>)`, every default pass
  on, topology-aware batching; on advanced RAG pass prune_covered_searches off, because the
  baselines always expand (equal work keeps the expansion call);
- LangGraph: StateGraphs whose LLM calls go through langchain-openai's `ChatOpenAI` to
  `/v1/chat/completions`: bench/baselines/langgraph_rag.py for RAG, bench/baselines/langgraph_remote.py's
  graphs for search generation and the tool agent with their LLM client swapped for `ChatOpenAIClient` below;
- LlamaIndex: llama-index-core (its splitter swapped for one that writes teola's chunks, as the
  LangGraph graph chunks with teola's chunker) with llama-index's own OpenAI-compatible class
  (`OpenAILike`, bench.baselines.llamaindex_server) to `/v1/chat/completions` on its own server: in
  RAG through bench.baselines.llamaindex_rag, in the tool agent and search generation as the client
  (`OpenAILikeClient` below) behind bench.baselines.llamaindex_remote's LLM. (Before, the tool agent's
  and search generation's LlamaIndex called teola's remote-LLM adapter, so its client CPU was teola's.)

One prompt text per call: LangGraph's chat messages are a system message and ONE user message of the
parts joined as teola's renderer joins them (engines.llm_text.llm_requests), and the server renders
the model's chat template, which teola renders client-side; per-call prompt tokens are compared in
the results. Fixed output lengths: the servers run `--output-len max`, so every call writes exactly
its max_tokens (no end of sequence, as with ignore_eos) for every client alike.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.baselines.llamaindex_engines import CallLog
from bench.lib.llm_work import llm_calls
from bench.lib.workloads import app_query
from bench.studies.rag.rag_analysis import op_times
from bench.studies.rag.rag_runs import run_query
from engines.llm_text.llm_requests import PART_SEPARATOR, SYSTEM_PART_NAMES
from engines.requests import PrimOp

MODEL = "smollm2-135m-instruct"
QUERY_TIMEOUT = 600.0
RAG_APPS = ("naive_rag", "advanced_rag")
# per app: the query config every teola query gets (equal work: the calls the baselines make)
TEOLA_CONFIG: dict[str, dict[str, Any]] = {
    "advanced_rag": {"passes": {"prune_covered_searches": False}},
}
# per app: node overrides for every system (naive RAG ships tree synthesis; the LangGraph RAG graph
# writes compact synthesis only, so all three run compact: one call over the kept chunks)
NODES: dict[str, dict[str, Any]] = {"naive_rag": {"synthesis": {"mode": "compact"}}}


def chat_messages(parts: list[list[str]]) -> list[Any]:
    """LangChain messages of a request's prompt parts, as teola's renderer lays them out: the leading
    system part as the system message, every other part in ONE user message, PART_SEPARATOR-joined."""
    from langchain_core.messages import HumanMessage, SystemMessage

    rest = list(parts)
    system = rest.pop(0)[1] if rest and rest[0][0] in SYSTEM_PART_NAMES else None
    user = PART_SEPARATOR.join(text for _, text in rest if text)
    return ([SystemMessage(system)] if system is not None else []) + [HumanMessage(user)]


class ChatOpenAIClient:
    """Stands in for the "llm" EngineClient of bench.baselines.langgraph_remote's graphs: each "decoding"
    request is one `ChatOpenAI.ainvoke` to the server (one ChatOpenAI per max_tokens, built once)."""

    def __init__(
        self,
        base_url: str,
        model: str = MODEL,
        log: CallLog | None = None,
        chats: dict[int, Any] | None = None,
    ) -> None:
        self.base_url, self.model, self.log = base_url, model, log
        self.chats = {} if chats is None else chats

    def with_log(self, log: CallLog) -> ChatOpenAIClient:
        return ChatOpenAIClient(self.base_url, self.model, log, self.chats)

    def chat(self, max_tokens: int) -> Any:
        from langchain_openai import ChatOpenAI

        if max_tokens not in self.chats:
            self.chats[max_tokens] = ChatOpenAI(
                base_url=f"{self.base_url}/v1",
                api_key="EMPTY",
                model=self.model,
                temperature=0.0,
                max_retries=0,
                max_tokens=max_tokens,
            )
        return self.chats[max_tokens]

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if op != PrimOp.DECODING or len(requests) != 1:
            raise ValueError(
                f"ChatOpenAIClient sends one decoding request per call, got {op!r} x {len(requests)}"
            )
        req, started = requests[0], time.perf_counter()
        reply = await self.chat(int(req["max_tokens"])).ainvoke(
            chat_messages(req["parts"]), stop=req.get("stop")
        )
        usage = reply.usage_metadata or {}
        result = [
            {
                "text": str(reply.content),
                "num_prompt_tokens": usage.get("input_tokens", 0),
                "num_output_tokens": usage.get("output_tokens", 0),
                "num_cached_tokens": (usage.get("input_token_details") or {}).get("cache_read", 0),
            }
        ]
        if self.log is not None:
            self.log.add("llm", "decoding", 1, started, result)
        return result


class OpenAILikeClient:
    """Stands in for the "llm" EngineClient of bench.baselines.llamaindex_remote's agents: each "decoding"
    request is one call of LlamaIndex's `OpenAILike` (bench.baselines.llamaindex_server.ServerLLM, one
    per max_tokens, built once) to the server's chat API."""

    def __init__(
        self,
        base_url: str,
        model: str = MODEL,
        log: CallLog | None = None,
        llms: dict[int, Any] | None = None,
    ) -> None:
        self.base_url, self.model, self.log = base_url, model, log
        self.llms = {} if llms is None else llms

    def with_log(self, log: CallLog) -> OpenAILikeClient:
        return OpenAILikeClient(self.base_url, self.model, log, self.llms)

    def llm(self, max_tokens: int) -> Any:
        from bench.baselines.llamaindex_server import server_llm

        if max_tokens not in self.llms:
            self.llms[max_tokens] = server_llm((f"{self.base_url}/v1", self.model), None, max_tokens, 2048)
        return self.llms[max_tokens]

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole

        if op != PrimOp.DECODING or len(requests) != 1:
            raise ValueError(
                f"OpenAILikeClient sends one decoding request per call, got {op!r} x {len(requests)}"
            )
        req, started = requests[0], time.perf_counter()
        messages = [
            ChatMessage(
                role=MessageRole.SYSTEM if m.type == "system" else MessageRole.USER, content=str(m.content)
            )
            for m in chat_messages(req["parts"])
        ]
        stop = {"stop": req["stop"]} if req.get("stop") else {}
        reply = await self.llm(int(req["max_tokens"])).achat(messages, **stop)
        usage = getattr(reply.raw, "usage", None)
        details = getattr(usage, "prompt_tokens_details", None)
        result = [
            {
                "text": reply.message.content or "",
                "num_prompt_tokens": getattr(usage, "prompt_tokens", 0) or 0,
                "num_output_tokens": getattr(usage, "completion_tokens", 0) or 0,
                "num_cached_tokens": getattr(details, "cached_tokens", 0) or 0,
            }
        ]
        if self.log is not None:
            self.log.add("llm", "decoding", 1, started, result)
        return result


def teola_chunks(size: int, overlap: int, tokenizer: Any) -> Any:
    """A LlamaIndex text splitter that writes teola's chunks (teola.compile.chunking.chunk_text), so
    the LlamaIndex baseline embeds, stores and retrieves the same chunks as the other systems."""
    from llama_index.core.node_parser import TextSplitter
    from pydantic import PrivateAttr

    from teola.compile.chunking import chunk_text

    class TeolaChunks(TextSplitter):
        chunk_size: int
        chunk_overlap: int
        _tokenizer: Any = PrivateAttr()

        def split_text(self, text: str) -> list[str]:
            return chunk_text(text, self.chunk_size, self.chunk_overlap, self._tokenizer)

    splitter = TeolaChunks(chunk_size=size, chunk_overlap=overlap)
    splitter._tokenizer = tokenizer
    return splitter


def backends_of(app: Any) -> dict[str, Any]:
    return {name: insts[0].handle for name, insts in app.runtime.instances.items() if insts}


def make_baseline(system: str, app: Any, url: str, llm_engine: Any) -> Any:
    """The baseline `system` over a started app's non-LLM adapters; its LLM on the server at `url`
    (LangGraph: ChatOpenAI; LlamaIndex: OpenAILike; its RAG reads the server and tokenizer from `llm_engine`,
    a started remote-LLM adapter on that server)."""
    from bench.baselines.llamaindex_rag import RAGSpec, app_chunk_tokenizer

    nodes = NODES.get(app.name, {})
    if app.name in RAG_APPS:
        backends = {**backends_of(app), "llm": llm_engine}
        spec = RAGSpec.from_template(app.nodes, nodes)
        if system == "LangGraph":
            from bench.baselines.langgraph_rag import LangGraphRAG

            return LangGraphRAG(backends, spec, f"{url}/v1", MODEL, app_chunk_tokenizer(app, nodes))
        from bench.baselines.llamaindex_rag import LlamaIndexRAG

        impl = LlamaIndexRAG(backends, spec, app_chunk_tokenizer(app, nodes))
        impl.splitter = teola_chunks(spec.chunk_size, spec.chunk_overlap, app_chunk_tokenizer(app, nodes))
        return impl
    if system == "LangGraph":
        from bench.baselines.langgraph_remote import LangGraphSearchGeneration, LangGraphToolAgent

        impl = (LangGraphSearchGeneration if app.name == "search_generation" else LangGraphToolAgent)(app)
        impl.clients["llm"] = ChatOpenAIClient(url)
        return impl
    from bench.baselines.llamaindex_remote import LlamaIndexSearchGeneration, LlamaIndexToolAgent

    impl = (LlamaIndexSearchGeneration if app.name == "search_generation" else LlamaIndexToolAgent)(app)
    impl.clients["llm"] = OpenAILikeClient(url)
    return impl


# ---- one query ----------------------------------------------------------------------------------
def busy(trace: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds of the query during which an op of each stage was executing
    (bench.studies.rag.rag_analysis.op_times)."""
    return {op: round(d["exec"], 4) for op, d in op_times(trace).items()}


def _finish(rec: dict[str, Any], trace: list[dict[str, Any]], t0: float) -> dict[str, Any]:
    rec["latency"] = time.perf_counter() - t0
    rec.update(
        calls=llm_calls(trace),
        busy=busy(trace),
        prefills=sum(
            1
            for t in trace
            if t.get("op") in ("prefilling", "partial_prefilling") and not t.get("fused_into")
        ),
    )
    return rec


async def teola_one(
    app: Any, q: dict[str, Any], arrival: float, index: int, passes_off: dict[str, bool] | None = None
) -> dict[str, Any]:
    """One teola query (`passes_off`: more passes off, for a variant measured beside teola)."""
    t0 = time.perf_counter()
    query = app_query(q) if app.name in RAG_APPS else {"question": q["question"]}
    config = {**TEOLA_CONFIG.get(app.name, {}), "nodes": NODES.get(app.name, {})}
    config["passes"] = {**config.get("passes", {}), **(passes_off or {})}
    rec = await run_query(app, query, config, "topology", arrival, index)
    trace = rec.pop("trace", [])
    rec.pop("parents", None)
    rec["answer"] = str(rec.get("answer", ""))[:120]
    return _finish(rec, trace, t0)


async def baseline_one(app: Any, impl: Any, q: dict[str, Any], arrival: float, index: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"i": index, "arrival": arrival}
    trace: list[dict[str, Any]] = []
    try:
        args = (q["question"], q["documents"]) if app.name in RAG_APPS else (q["question"],)
        ans = await asyncio.wait_for(impl.aquery(*args), QUERY_TIMEOUT)
        trace = ans.trace
        rec.update(ok=True, answer=ans.text[:120])
    except Exception as exc:  # noqa: BLE001 -- a failed query is recorded and counted, the run goes on
        rec.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
    return _finish(rec, trace, t0)
