"""The options of every built-in component kind, typed and bounded: one pydantic model per kind.

These models are the configuration schema. The compiler validates every node's options (the app's
own `Node(config=...)` and a query's `config.nodes.<node>` overrides) against its kind's model
before anything is built, so a wrong type, an out-of-range number, text an engine cannot take or an
unknown key fails with a message naming its path; the HTTP API publishes the same models in its
OpenAPI document and per app at `GET /v1/apps/{app}/config_schema`. A field left out means the
component's default (named in the field's description). The bounds keep one query's graph small
enough to compile quickly; the server's `max_primitives` caps the whole graph.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from engines.requests import REQUEST_DEFAULTS
from teola.ir.generation import MAX_STOPS, MAX_TEMPERATURE, MAX_TOKENS_LIMIT

WEB_SEARCH_TOP_K = 4  # web results per query: a search API answers a few pages, not an index's chunks

MAX_TEXT = 20_000  # characters of one instruction or prompt part written in a config
MAX_COUNT = 10_000  # results, items and chunks one node may ask for
DEFAULT_CHUNK_SIZE = 256  # tokens per chunk of an indexing node


def _engine_text(value: str) -> str:
    """Text an engine can take: no NUL (PostgreSQL and tokenizers reject it), no lone surrogate."""
    if "\x00" in value:
        raise ValueError("contains a NUL character (\\u0000)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"contains a lone surrogate at character {exc.start}") from None
    return value


Text = Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(_engine_text)]
Name = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_engine_text)]


class Options(BaseModel):
    """Base of the option models: strict types, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", strict=True)


class GenOptions(Options):
    """Generation settings of a component that calls the LLM (defaults: `teola.ir.generation.DEFAULT_GEN`)."""

    max_tokens: int | None = Field(
        None, ge=1, le=MAX_TOKENS_LIMIT, description="Tokens to decode at most (default 128)."
    )
    temperature: float | None = Field(
        None, ge=0, le=MAX_TEMPERATURE, description="Sampling temperature (default 0: greedy)."
    )
    stop: Text | list[Text] | None = Field(None, description=f"Stop text(s), at most {MAX_STOPS}.")


class IndexingOptions(Options):
    chunk_size: int | None = Field(
        None, ge=1, le=8192, description="Tokens per chunk (default 256; see tokenizer)."
    )
    chunk_overlap: int | None = Field(
        None,
        ge=0,
        le=4096,
        description="Tokens shared by consecutive chunks (default 30; at most half of chunk_size).",
    )
    max_chunks: int | None = Field(
        None, ge=1, le=100_000, description="Chunks the query's documents may make (default 20000)."
    )
    tokenizer: Literal["engine", "words"] | None = Field(
        None,
        description="What chunk tokens are: 'engine' (default), the embedding engine's model tokenizer when "
        "its files are on disk, else words and punctuation marks; 'words': always those.",
    )
    split: Literal["sentence", "window"] | None = Field(
        None,
        description="How chunks are cut: 'sentence' (default), whole sentences up to chunk_size and "
        "an overlap of whole sentences, as LlamaIndex's SentenceSplitter; 'window', sliding windows of "
        "chunk_size tokens cut at words.",
    )
    vectordb: Name | None = Field(
        None, description="Vector-store engine to ingest into as part of this node."
    )

    @field_validator("chunk_overlap")
    @classmethod
    def _at_most_half_a_chunk(cls, overlap: int | None, info: ValidationInfo) -> int | None:
        # windows that step less than half a chunk repeat a document's text many times over
        size = info.data.get("chunk_size") or DEFAULT_CHUNK_SIZE
        if overlap is not None and overlap > size // 2:
            raise ValueError(
                f"must be at most half of chunk_size ({size} // 2 = {size // 2}); lower chunk_overlap "
                "or raise chunk_size"
            )
        return overlap


class IngestionOptions(Options):
    pass


class QueryExpansionOptions(GenOptions):
    num_queries: int | None = Field(None, ge=1, le=64, description="Search queries to write (default 3).")
    instruction: Text | None = Field(
        None, description="System instruction (default prompts.EXPANSION_SYSTEM)."
    )
    task: Text | None = Field(
        None, description='The task text; the literal "{n}" becomes num_queries (default prompts.EXPANSION).'
    )


class QueryEmbeddingOptions(Options):
    include_question: bool | None = Field(None, description="Also embed the question itself (default true).")


class SearchOptions(Options):
    top_k: int | None = Field(
        None,
        ge=1,
        le=MAX_COUNT,
        description=f"Results per search query (default {REQUEST_DEFAULTS['top_k']}).",
    )


class RerankOptions(Options):
    top_n: int | None = Field(
        None, ge=1, le=MAX_COUNT, description="Results kept after reranking (default 3)."
    )


class SynthesisOptions(GenOptions):
    mode: Literal["compact", "refine", "tree"] | None = Field(
        None, description="LlamaIndex response mode (default compact)."
    )
    instruction: Text | None = Field(
        None, description="Answer instruction, after the context in the prompt (default prompts.QA)."
    )
    refine_instruction: Text | None = Field(None, description="Refine instruction (default prompts.REFINE).")
    merge_instruction: Text | None = Field(
        None, description="Tree merge instruction (default prompts.TREE_MERGE)."
    )
    ask: Text | None = Field(
        None, description="Text that ends every prompt (default prompts.ASK; null leaves it out)."
    )
    token_ratio: float | None = Field(
        None, ge=0.1, le=100, description="LLM tokens per counted token when packing (default 2)."
    )
    pack_size: int | None = Field(
        None,
        ge=1,
        le=MAX_COUNT,
        description="Chunks per prompt (default: as many as fit the context window).",
    )
    fan_in: int | None = Field(
        None, ge=2, le=64, description="Answers merged per tree merge call (default: as many as fit)."
    )


class LlmOptions(GenOptions):
    parts: list[Annotated[list[Text], Field(min_length=2, max_length=2)]] | None = Field(
        None,
        max_length=64,
        description='Prompt parts [[name, source], ...]: literal text, "$query.<field>" or "$<port>".',
    )
    split: Literal["list", "jsonl"] | None = Field(
        None, description="Split the answer into items (list lines or JSON lines)."
    )
    num_items: int | None = Field(
        None, ge=1, le=MAX_COUNT, description="Items a split answer holds at most (default 4)."
    )


class AgentOptions(GenOptions):
    tool_engine: Name | None = Field(
        None,
        description="The registered engine of kind 'tool' that runs the calls "
        "(required; set by the app only).",
    )
    tools: list[Name] | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="Tools the model may call (required; a query may pick a subset of the app's).",
    )
    max_rounds: int | None = Field(
        None, ge=1, le=8, description="Tool calls in one answer at most (default 2)."
    )
    handling: Literal["discard", "preserve", "swap", "auto"] | None = Field(
        None,
        description="What the LLM engine does with the call's KV during a tool call (default discard; "
        "auto: INFERCEPT's least-waste choice when each segment is queued).",
    )
    instruction: Text | None = Field(
        None,
        description="System instruction (default teola.compile.tool_syntax.TOOL_INSTRUCTION "
        "listing the tools; set by the app only).",
    )
    examples: Text | None = Field(
        None,
        description="Worked tool calls placed after the instruction (default none; set by the app only).",
    )
    start: Text | None = Field(
        None,
        description="Text the model's turn begins with, e.g. '<tool>{\"name\": \"' "
        "to force a first tool call (default none).",
    )
    parts: list[Annotated[list[Text], Field(min_length=2, max_length=2)]] | None = Field(
        None,
        max_length=64,
        description='Prompt parts after the instruction (default [["question", "$query.question"]]; '
        "set by the app only).",
    )


class WebSearchOptions(Options):
    top_k: int | None = Field(
        None, ge=1, le=MAX_COUNT, description=f"Results per search query (default {WEB_SEARCH_TOP_K})."
    )


class ToolOptions(Options):
    tools: list[Name] | None = Field(
        None,
        max_length=256,
        description="Tools the node may call (default: none; a query "
        "may pick a subset of the app's, an empty list: none).",
    )


class ConditionOptions(Options):
    contains: Text | None = Field(None, description="Holds when the upstream text contains this.")
    not_contains: Text | None = Field(None, description="Holds when the upstream text does not contain this.")
    equals: Text | None = Field(None, description="Holds when the upstream text equals this (trimmed).")
    case_sensitive: bool | None = Field(None, description="Compare case-sensitively (default false).")


class AggregateOptions(Options):
    mode: Literal["first", "concat", "join"] | None = Field(
        None, description="How upstream outputs combine (default first)."
    )


BUILTIN_OPTIONS: dict[str, type[Options]] = {
    "indexing": IndexingOptions,
    "ingestion": IngestionOptions,
    "query_expansion": QueryExpansionOptions,
    "query_embedding": QueryEmbeddingOptions,
    "search": SearchOptions,
    "rerank": RerankOptions,
    "synthesis": SynthesisOptions,
    "llm": LlmOptions,
    "agent": AgentOptions,
    "web_search": WebSearchOptions,
    "tool": ToolOptions,
    "condition": ConditionOptions,
    "aggregate": AggregateOptions,
}
