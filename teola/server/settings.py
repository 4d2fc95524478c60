"""Server settings: limits, timeouts and the optional API key, each overridable from the environment."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

_ENV_PREFIX = "TEOLA_"


@dataclass(slots=True)
class ServerSettings:
    """Limits and options of one teola server.

    Every field can be set from the environment as ``TEOLA_<FIELD NAME IN UPPER CASE>`` (for example
    ``TEOLA_MAX_BODY_BYTES=1048576``, ``TEOLA_QUERY_TIMEOUT=30``, ``TEOLA_API_KEY=secret``) through
    `ServerSettings.from_env()`; keyword arguments given there win over the environment.

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
    max_stored_documents: uploaded documents kept in memory (oldest dropped first).
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
        (teola.server.openai_door) ends on its own, when no call ended it.
    secret: the server secret tenants' prefix-cache salts derive from (HMAC-SHA256; env
        TEOLA_SECRET); None: a random secret kept in ``<cache>/server-secret``, made on first use,
        so salts survive restarts. Setting another (or deleting the file) rotates every salt.
    """

    max_body_bytes: int = 16 * 1024 * 1024
    max_documents: int = 64
    max_document_chars: int = 1_000_000
    query_timeout: float = 300.0
    api_key: str | None = None
    api_keys: str | None = None
    api_keys_file: str | None = None
    max_stored_documents: int = 1024
    max_primitives: int = 5000
    malloc_arenas: int = 2
    start_engines: bool = True
    allow_policy_switch: bool = False
    program_idle_timeout: float = 300.0
    secret: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_documents", "max_document_chars", "max_stored_documents",
                     "max_primitives"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ServerSettings.{name} must be an int >= 1, got {value!r}")
        if not isinstance(self.malloc_arenas, int) or isinstance(self.malloc_arenas, bool) or self.malloc_arenas < 0:
            raise ValueError(f"ServerSettings.malloc_arenas must be an int >= 0, got {self.malloc_arenas!r}")
        if (isinstance(self.program_idle_timeout, bool) or not isinstance(self.program_idle_timeout, (int, float))
                or self.program_idle_timeout <= 0):
            raise ValueError(f"ServerSettings.program_idle_timeout must be a number of seconds > 0, "
                             f"got {self.program_idle_timeout!r}")
        if not isinstance(self.query_timeout, (int, float)) or self.query_timeout <= 0:
            raise ValueError(f"ServerSettings.query_timeout must be a number of seconds > 0, got {self.query_timeout!r}")
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key):
            raise ValueError("ServerSettings.api_key must be a non-empty string or None")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> "ServerSettings":
        """Settings from ``TEOLA_*`` environment variables, then `overrides`. A malformed value raises
        ValueError naming the variable."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name == "extra":
                continue
            var = _ENV_PREFIX + f.name.upper()
            raw = env.get(var)
            if raw is None or raw == "":
                continue
            values[f.name] = _parse(var, raw, f.type)
        values.update({k: v for k, v in overrides.items() if v is not None})
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown server setting(s) {unknown}; known: {[f.name for f in fields(cls)]}")
        return cls(**values)


def _parse(var: str, raw: str, annotation: Any) -> Any:
    kind = str(annotation)
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "bool":
            low = raw.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
    except ValueError:
        raise ValueError(f"environment variable {var}={raw!r} is not a valid {kind}") from None
    return raw
