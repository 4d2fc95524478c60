"""Server settings: limits, timeouts and the optional API key, each overridable from the environment
(pydantic-settings)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import Field, TypeAdapter, ValidationError, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

_ENV_PREFIX = "TEOLA_"


class ServerSettings(BaseSettings):
    """Limits and options of one teola server.

    Every field can be set from the environment as ``TEOLA_<FIELD NAME IN UPPER CASE>`` (for example
    ``TEOLA_MAX_BODY_BYTES=1048576``, ``TEOLA_QUERY_TIMEOUT=30``, ``TEOLA_API_KEY=secret``) through
    `ServerSettings.from_env()` (pydantic-settings reads and converts them; booleans as 1/0,
    true/false, yes/no, on/off); keyword arguments given there win over the environment. Built
    with keywords, ``ServerSettings(query_timeout=30)``, it reads no environment and takes each value
    as its exact type (no "30" for an int). An invalid value is a ValueError naming the field (and the
    variable it came from).

    max_body_bytes: largest request body accepted (413 above it).
    max_documents: most documents one query may carry, inline plus uploaded (413 above it).
    max_document_chars: longest document accepted, in characters (413 above it).
    query_timeout: seconds one query may run before the server answers 504; a query's own
        ``config.timeout`` can only lower it.
    api_key: when set, every endpoint except /healthz, /readyz and the OpenAPI docs needs
        ``Authorization: Bearer <api_key>`` (401 otherwise); the key's caller is tenant "default".
    api_keys: several tenants, ``"tenant-a:key1,key2;tenant-b:key3"`` (env TEOLA_API_KEYS); with
        any key set, every key authenticates and names its tenant (teola.server.tenants).
    api_keys_file: a JSON file ``{"tenant-a": ["key1", "key2"], ...}`` (env TEOLA_API_KEYS_FILE).
    documents: where uploaded documents and the registry of kept namespaces live (teola.server.store.base):
        ``"postgres"`` (default: tables in the same PostgreSQL as the vectors, started or connected
        on the first upload or kept namespace; durable across restarts) or ``"memory"`` (the server
        process's memory: same API and caps, lost when it exits; for servers and tests without
        PostgreSQL).
    pg_dsn: the PostgreSQL of the ``"postgres"`` documents backend (env TEOLA_PG_DSN, the same
        variable the pgvector engines read); None: the embedded server (engines.postgres.server).
    max_tenant_documents: most documents one tenant stores, all apps together (an upload past it
        is refused whole: 429 quota_exceeded with Retry-After).
    max_tenant_document_bytes: most bytes (UTF-8) of documents one tenant stores, all apps
        together (429 likewise).
    max_tenant_namespaces: most kept namespaces (``config.namespace``) one tenant has, all apps
        together (a query that would record one more gets 429 before it runs).
    max_tenant_kept_chunks: most chunks queries store in one tenant's kept namespaces, all apps
        together (a query that would store more gets 429 before it runs; deleting a namespace
        frees its chunks).
    max_tenant_kept_bytes: most bytes (UTF-8) of chunk text queries store in one tenant's kept
        namespaces, all apps together (429 likewise).
    tenant_max_queries: queries (and OpenAI-door calls) one tenant may have running at once; one
        more gets 429 too_many_queries with Retry-After (teola.server.quotas). 0: no limit.
    tenant_tokens_per_minute: LLM tokens (prompt + output, as the engines report them) one tenant
        may use per minute; past it, 429 token_rate_exceeded with Retry-After until the minute
        resets. 0 (default): no limit.
    tenant_shares: fair-queuing weights of tenants on every engine, ``"gold:3,free:1"`` (unlisted
        tenants weigh 1): when an engine is saturated, a tenant's share, not arrival order,
        decides whose work waits (teola.runtime.engine_tier.tenant_shares).
    malloc_arenas: cap on glibc's malloc arenas for the process (teola.server.memory; 0 leaves
        glibc's default of 8 per core, under which a busy server's memory keeps growing).
    max_primitives: most primitives one query's optimized graph may hold (413 above it): a bound on
        the work one request can ask for, whatever its documents and options.
    start_engines: start every app's engines when the server starts (lifespan); when False they
        start on the first query.
    allow_policy_switch: whether a query's ``config.policy`` may name another batching policy than
        the one the app's engines run. A policy is engine-wide: switching it changes how every
        other user's queries are scheduled, so by default such a query gets 422 (naming the
        running policy); turn it on for single-tenant experiments.
    program_idle_timeout: seconds after its last call that a program of the OpenAI-compatible door
        (teola.server.openai.door) ends on its own, when no call ended it.
    allowed_hosts: Host names requests may carry besides the default ones, comma-separated
        (``"teola.example.com,*.corp.example"``; ``"*"`` turns the check off; env
        TEOLA_ALLOWED_HOSTS). By default only hosts no public DNS name can point at are served: IP
        addresses, names without a dot (``localhost``, the machine's own name), ``*.localhost`` and
        ``*.test``, plus the host the server was told it binds (teola.server.hosts). Any other Host
        gets 400 ``host_not_allowed``: a web page cannot rebind its own name to this server.
    body_timeout: seconds a client has to send a request's whole body (408 past it), so slow
        connections do not hold the server's memory.
    compile_threads: threads compiling queries, apart from the ones tools and the document store
        use; one tenant runs at most all but one of them at once (teola.server.compiling).
    compile_queue: compilations that may wait for a compile thread; one more gets 503
        ``compile_busy`` with Retry-After.
    secret: the server secret tenants' prefix-cache salts derive from (HMAC-SHA256; env
        TEOLA_SECRET); None: a random secret kept in ``<cache>/server-secret``, made on first use,
        so salts survive restarts. Setting another (or deleting the file) rotates every salt.
    max_file_bytes: largest uploaded file (PDF, HTML, Markdown, DOCX, text) read into a document
        (413 above it; teola.server.uploads).
    max_file_pages: most pages of an uploaded PDF (413 above it).
    sse_keepalive: seconds of silence after which a streamed query (``"stream": true``) or a streamed
        call of the OpenAI door sends a ``: keep-alive`` comment, and again every as many seconds
        while it stays idle, so proxies that close idle connections keep the stream open
        (teola.server.streaming, teola.server.openai.stream); 0: none.
    """

    model_config = SettingsConfigDict(
        env_prefix=_ENV_PREFIX, env_ignore_empty=True, strict=True, extra="forbid", validate_assignment=True
    )

    max_body_bytes: int = 16 * 1024 * 1024
    max_documents: int = 64
    max_document_chars: int = 1_000_000
    query_timeout: float = 300.0
    api_key: str | None = None
    api_keys: str | None = None
    api_keys_file: str | None = None
    documents: str = "postgres"
    pg_dsn: str | None = None
    max_tenant_documents: int = 10_000
    max_tenant_document_bytes: int = 256 * 1024 * 1024
    max_tenant_namespaces: int = 100
    max_tenant_kept_chunks: int = 100_000
    max_tenant_kept_bytes: int = 256 * 1024 * 1024
    max_primitives: int = 5000
    tenant_max_queries: int = 64
    tenant_tokens_per_minute: int = 0
    tenant_shares: str | None = None
    malloc_arenas: int = 2
    start_engines: bool = True
    allow_policy_switch: bool = False
    program_idle_timeout: float = 300.0
    allowed_hosts: str | None = None
    body_timeout: float = 30.0
    compile_threads: int = 4
    compile_queue: int = 256
    secret: str | None = None
    max_file_bytes: int = 16 * 1024 * 1024
    max_file_pages: int = 500
    sse_keepalive: float = 15.0
    extra: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ValueError(_describe(exc)) from None

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            raise ValueError(_describe(exc)) from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keywords only: the environment is read by `from_env`, never by plain construction."""
        return (init_settings,)

    @model_validator(mode="after")
    def _check(self) -> ServerSettings:
        for name in (
            "max_body_bytes",
            "max_documents",
            "max_document_chars",
            "max_tenant_documents",
            "max_tenant_document_bytes",
            "max_tenant_namespaces",
            "max_tenant_kept_chunks",
            "max_tenant_kept_bytes",
            "max_primitives",
            "compile_threads",
            "max_file_bytes",
            "max_file_pages",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ServerSettings.{name} must be an int >= 1, got {value!r}")
        if (
            not isinstance(self.malloc_arenas, int)
            or isinstance(self.malloc_arenas, bool)
            or self.malloc_arenas < 0
        ):
            raise ValueError(f"ServerSettings.malloc_arenas must be an int >= 0, got {self.malloc_arenas!r}")
        if (
            isinstance(self.sse_keepalive, bool)
            or not isinstance(self.sse_keepalive, (int, float))
            or not self.sse_keepalive >= 0
        ):
            raise ValueError(
                f"ServerSettings.sse_keepalive must be a number of seconds >= 0 (0: no keep-alive "
                f"comments), got {self.sse_keepalive!r}"
            )
        for name in ("program_idle_timeout", "body_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"ServerSettings.{name} must be a number of seconds > 0, got {value!r}")
        if not isinstance(self.query_timeout, (int, float)) or self.query_timeout <= 0:
            raise ValueError(
                f"ServerSettings.query_timeout must be a number of seconds > 0, got {self.query_timeout!r}"
            )
        if (
            not isinstance(self.compile_queue, int)
            or isinstance(self.compile_queue, bool)
            or self.compile_queue < 0
        ):
            raise ValueError(f"ServerSettings.compile_queue must be an int >= 0, got {self.compile_queue!r}")
        for name in ("tenant_max_queries", "tenant_tokens_per_minute"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"ServerSettings.{name} must be an int >= 0 (0: no limit), got {value!r}")
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key):
            raise ValueError("ServerSettings.api_key must be a non-empty string or None")
        if self.documents not in ("postgres", "memory"):
            raise ValueError(
                f"ServerSettings.documents must be 'postgres' or 'memory' (env TEOLA_DOCUMENTS), "
                f"got {self.documents!r}"
            )
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ServerSettings:
        """Settings from ``TEOLA_*`` environment variables (`environ`, default os.environ), then
        `overrides` (None values ignored). A malformed value raises ValueError naming the variable."""
        values = {k: v for k, v in overrides.items() if v is not None}
        unknown = sorted(set(values) - set(cls.model_fields))
        if unknown:
            raise ValueError(f"unknown server setting(s) {unknown}; known: {list(cls.model_fields)}")
        raw = _Environ(cls, os.environ if environ is None else environ)()
        parsed = {}
        for name, value in raw.items():
            annotation = cls.model_fields[name].annotation
            try:  # lax: "30" -> 30, "off" -> False
                parsed[name] = TypeAdapter(annotation).validate_python(value)
            except ValidationError:
                kind = getattr(annotation, "__name__", str(annotation))
                raise ValueError(
                    f"environment variable {_ENV_PREFIX}{name.upper()}={value!r} is not a valid {kind}"
                ) from None
        return cls(**(parsed | values))


class _Environ(EnvSettingsSource):
    """The ``TEOLA_*`` variables of a given mapping (os.environ or a test's dict), "extra" excepted."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        # names matched case-insensitively (lower case, as the source looks them up); "" is unset
        return {
            k.lower(): v for k, v in self._environ.items() if v != "" and k.upper() != f"{_ENV_PREFIX}EXTRA"
        }


def _describe(exc: ValidationError) -> str:
    """One message naming each invalid field (the settings' own check's message when it has one)."""
    lines = []
    for err in exc.errors():
        name = str(err["loc"][0]) if err["loc"] else ""
        if err["type"] == "value_error":
            lines.append(str(err["ctx"]["error"]))
        elif err["type"] == "extra_forbidden":
            lines.append(f"unknown server setting {name!r}; known: {list(ServerSettings.model_fields)}")
        else:
            lines.append(f"ServerSettings.{name}: {err['msg'].lower()}, got {err['input']!r}")
    return "; ".join(lines)
