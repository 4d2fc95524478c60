"""Request and response bodies of the HTTP API (pydantic models; they also shape the OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, WithJsonSchema, field_validator

from teola.compile.config_schema import nodes_schema, passes_schema

MAX_PRIORITY = 1000  # a client's priority is 0..MAX_PRIORITY: never ahead of the default, so fair shares hold
CONFIG_KEYS = (
    "passes",
    "policy",
    "nodes",
    "timeout",
    "primitive_timeout",
    "priority",
    "prescheduling",
    "namespace",
)


class QueryBody(BaseModel):
    """The query an app runs: a question, documents for the RAG apps (inline, or ids returned by the
    documents endpoint), and any other fields the app's template reads as ``$query.<field>``."""

    model_config = ConfigDict(extra="allow")

    question: str = Field(min_length=1, description="The user's question.")
    documents: list[str] | None = Field(default=None, description="Document texts (RAG apps).")
    document_ids: list[str] | None = Field(
        default=None,
        description="Ids from POST /v1/apps/{app}/documents; their texts are appended to documents.",
    )


class QueryConfig(BaseModel):
    """Per-query configuration. Unknown keys are rejected (422) so typos do not pass silently."""

    model_config = ConfigDict(extra="forbid")

    # typed per pass and per component kind in the schema; the compiler validates the values
    # against the same models (per app: GET /v1/apps/{app}/config_schema)
    passes: Annotated[dict[str, StrictBool | dict[str, Any]], WithJsonSchema(passes_schema())] | None = Field(
        default=None, description='Turn passes on/off or give them options: {"prefill_split": false}.'
    )
    policy: str | None = Field(default=None, description='Engine batching policy by name, e.g. "topology".')
    nodes: Annotated[dict[str, dict[str, Any]], WithJsonSchema(nodes_schema())] | None = Field(
        default=None,
        description="Per-component option overrides: {component name: {option: value}}; each "
        "app's nodes and their options: GET /v1/apps/{app}/config_schema.",
    )
    timeout: float | None = Field(
        default=None, gt=0, description="Seconds this query may run (capped by the server)."
    )
    primitive_timeout: float | None = Field(default=None, gt=0, description="Seconds one primitive may run.")
    priority: int | None = Field(
        default=None,
        ge=0,
        le=MAX_PRIORITY,
        description=f"Scheduling priority at the LLM engines, 0 (the default, first) to "
        f"{MAX_PRIORITY}; lower runs first. A request may only lower its own "
        "priority: running ahead of other tenants is the operator's to set.",
    )
    prescheduling: StrictBool | None = Field(
        default=None, description="Fuse a prefill into its only decode (default on)."
    )
    namespace: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        description="A persistent vector-store collection of the caller's tenant: the query's documents are "
        "added to it and searched with what it already holds (kept after the query; delete with "
        "DELETE /v1/apps/{app}/namespaces/{namespace}). Without it, a fresh namespace per query, "
        "dropped at its end.",
    )

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str | None) -> str | None:
        if value is None:
            return value
        from teola.runtime import policy_names

        names = policy_names()
        if value not in names:
            raise ValueError(f"unknown policy {value!r}; known policies: {', '.join(names)}")
        return value

    def to_dict(self) -> dict[str, Any]:
        """The keys that were set, as the plain dict `App.run` takes."""
        return self.model_dump(exclude_none=True)


class QueryRequest(BaseModel):
    """Body of POST /v1/apps/{app}/query."""

    model_config = ConfigDict(extra="forbid")

    query: QueryBody
    config: QueryConfig = Field(default_factory=QueryConfig)
    stream: StrictBool = Field(
        default=False,
        description="Answer as text/event-stream: started, progress, token, "
        "answer, trace and done events (error on failure).",
    )


class QueryResponse(BaseModel):
    """A finished query: its output, one trace entry per primitive, its id and its latency in seconds."""

    output: Any
    trace: list[dict[str, Any]]
    query_id: str
    latency: float


class ErrorResponse(BaseModel):
    """Every error: a short machine-readable code and a message naming the problem."""

    error: str
    detail: str


class DocumentsResponse(BaseModel):
    """Ids of uploaded documents, to pass as ``query.document_ids``."""

    document_ids: list[str]


class StoredDocument(BaseModel):
    """One stored document of the caller's tenant (GET /v1/apps/{app}/documents/{id} gives its text)."""

    id: str
    bytes: int = Field(description="Size of its text in UTF-8.")
    created: str = Field(description="When it was first uploaded (ISO 8601, UTC).")
    sha256: str | None = Field(
        None,
        description="SHA-256 (hex) of what its first upload sent: the file's "
        "bytes, or the text's UTF-8; clients compare it to skip unchanged files.",
    )
    name: str | None = Field(None, description="The file name its first upload gave, if it was a file.")
    namespace: str | None = Field(
        None,
        description="The `namespace` label of its first upload (a label only: "
        "kept vector-store namespaces are filled by queries).",
    )


class TenantUsage(BaseModel):
    """What the caller's tenant stores over all apps, and its caps."""

    documents: int
    bytes: int
    max_documents: int
    max_bytes: int


class DocumentList(BaseModel):
    """A page of the caller's documents of an app, in id order."""

    documents: list[StoredDocument]
    next_after: str | None = Field(description="Pass as `after` for the next page; null on the last one.")
    usage: TenantUsage


class KeptNamespace(BaseModel):
    """One namespace the caller's tenant keeps (``config.namespace``)."""

    namespace: str
    created: str = Field(description="When a query first used it (ISO 8601, UTC).")


class NamespaceList(BaseModel):
    """The caller's kept namespaces of an app, by name, and the tenant's cap over all apps."""

    namespaces: list[KeptNamespace]
    max_namespaces: int
