"""The engine boundary's vocabulary, defined once at the lowest level: the operation names, the request
of each operation as a TypedDict, and the default of every request field a sender may leave out.
The runtime builds requests with these types (teola/runtime/requests.py) and every adapter reads a
missing field's default from `REQUEST_DEFAULTS` (`default(req, field)`), so no layer writes a default
of its own. Results per op are described in engines/protocol.py."""

from __future__ import annotations

import enum
from typing import Any, TypedDict


class PrimOp(str, enum.Enum):
    """What a primitive does (Teola Table 1, plus TOOL). Values are plain strings so they cross
    process boundaries as-is; teola.ir.ops adds the op families passes reason about."""

    EMBEDDING = "embedding"
    INGESTION = "ingestion"
    SEARCHING = "searching"
    RERANKING = "reranking"
    PREFILLING = "prefilling"
    DECODING = "decoding"
    PARTIAL_PREFILLING = "partial_prefilling"
    FULL_PREFILLING = "full_prefilling"
    PARTIAL_DECODING = "partial_decoding"
    CONDITION = "condition"
    AGGREGATE = "aggregate"
    TOOL = "tool"

    def __str__(self) -> str:
        return self.value


PREFILL_OPS = frozenset({PrimOp.PREFILLING, PrimOp.PARTIAL_PREFILLING, PrimOp.FULL_PREFILLING})
DECODE_OPS = frozenset({PrimOp.DECODING, PrimOp.PARTIAL_DECODING})
LLM_OPS = PREFILL_OPS | DECODE_OPS

# The default of every request field a sender may leave out, in one place.
REQUEST_DEFAULTS: dict[str, Any] = {
    # searching
    "top_k": 16,  # results per search query
    "exact": False,  # vector store: exact scan instead of the approximate index
    # LLM calls
    "complete": True,  # False: a prompt prefix only (partial prefilling)
    "max_tokens": 128,  # output budget of a call
    "temperature": 0.0,  # greedy
    "stop": None,  # stop texts
    "priority": 0,  # engine priority; lower runs first
    "split": None,  # how to cut a streamed output into items ("list", "jsonl")
    "ignore_eos": False,  # decode exactly max_tokens tokens
    "stream_text": False,  # stream ("delta", text) as it decodes
    "progress": False,  # stream ("progress", tokens decoded so far)
    "top_p": 1.0,  # nucleus sampling: keep the smallest token set of this probability
    "presence_penalty": 0.0,  # OpenAI's penalties on tokens already in the output
    "frequency_penalty": 0.0,
    "json_object": False,  # constrain the output to one JSON object (guided decoding)
    "json_schema": None,  # constrain the output to JSON matching this schema (guided decoding)
    "logprobs": None,  # None: no logprobs; k >= 0: each output token's logprob and its k top alternatives
}


def default(req: dict[str, Any], name: str) -> Any:
    """`req[name]`, or that field's one default when the request leaves it out."""
    return req.get(name, REQUEST_DEFAULTS[name])


# A query that keeps its documents in a namespace (config "namespace") ingests them under a staging
# namespace of its own, which the vector store publishes into the kept one in one transaction once
# every ingestion of the query succeeded (engines.postgres.vector_store). Clients may not name one.
STAGING_PREFIX = "teola:staging/"


def staging_namespace(query_id: str) -> str:
    """The staging namespace of query `query_id`."""
    return STAGING_PREFIX + query_id


def is_staging(namespace: str) -> bool:
    """Whether `namespace` is a query's staging namespace (never a client's)."""
    return namespace.startswith(STAGING_PREFIX)


# A query without config "namespace" ingests under a namespace generated for it and dropped when it
# ends; a vector store that outlives a killed writer drops it at its next start (its rows are
# recorded like a staging namespace's: engines.postgres.staging). Clients may not name one either.
QUERY_PREFIX = "teola:query/"


def query_namespace(query_id: str) -> str:
    """The namespace generated for query `query_id` (or any unique id)."""
    return QUERY_PREFIX + query_id


def is_temporary(namespace: str) -> bool:
    """Whether `namespace` lives only as long as its query: a generated one or a staging one."""
    return namespace.startswith((QUERY_PREFIX, STAGING_PREFIX))


class EmbeddingRequest(TypedDict):
    text: str


class IngestionRequest(TypedDict):
    namespace: str
    text: str
    embedding: Any  # list[float] or a numpy vector
    meta: dict[str, Any]


class VectorSearchRequest(TypedDict, total=False):
    """`staging`: a query's staging namespace (`staging_namespace`), searched along with `namespace`."""

    namespace: str
    embedding: Any
    top_k: int
    exact: bool
    staging: str


class TextSearchRequest(TypedDict, total=False):
    query: str
    top_k: int


class RerankRequest(TypedDict):
    query: str
    text: str


class LLMRequest(TypedDict, total=False):
    """One LLM call (every LLM op). `parts` is required; the rest default (REQUEST_DEFAULTS) or are
    absent: max_items (with a split), seed, top_p, presence/frequency penalties, json_object,
    json_schema and logprobs (sampling; the last three need the engine's Feature), messages / tools or
    raw_prompt (a decode's whole conversation, or its raw text, rendered instead of `parts`:
    engines/llm_text), owner / tag (keys abort() names), cache_salt, resume_ids and kv_swap_key (a preempted
    call's resume), and the fields of a call that pauses for tools (continuation, pause_kv, kv_key, api,
    predicted_tokens, resumes_preserved)."""

    parts: list[list[str]]
    complete: bool
    max_tokens: int
    temperature: float
    stop: list[str] | None
    priority: int
    split: str | None
    max_items: int
    ignore_eos: bool
    seed: int | None
    owner: str
    tag: str
    stream_text: bool
    progress: bool
    cache_salt: str
    resume_ids: list[int]
    kv_swap_key: str
    continuation: list[Any]
    pause_kv: str
    kv_key: str
    api: str
    predicted_tokens: int
    resumes_preserved: bool
    top_p: float
    presence_penalty: float
    frequency_penalty: float
    json_object: bool
    json_schema: dict[str, Any] | None
    logprobs: int | None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    raw_prompt: str


class ToolRequest(TypedDict, total=False):
    tool: str
    args: dict[str, Any]
    on_error: str
