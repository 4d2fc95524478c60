"""`ServerState`: what the endpoints of one server share (apps, settings, metrics, uploads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teola.server.compiling import CompilePool
from teola.server.errors import ApiError
from teola.server.metrics import ServerMetrics
from teola.server.quotas import TenantQuotas, parse_shares
from teola.server.recent import RecentQueries
from teola.server.settings import ServerSettings
from teola.server.store.base import TenantStore
from teola.server.store.documents import Documents
from teola.server.store.memory import MemoryStore
from teola.server.store.namespaces import Namespaces
from teola.server.store.postgres import PostgresStore
from teola.server.tenants import Tenants


class ServerState:
    """What the endpoints share: the apps, the settings, metrics, uploaded documents, kept namespaces,
    tenants' quotas and fair-queuing shares, recent queries and the compile threads."""

    def __init__(self, apps: Mapping[str, Any], settings: ServerSettings) -> None:
        self.apps = dict(apps)
        self.settings = settings
        self.metrics = ServerMetrics(lambda: self.apps)
        self.store = open_store(settings)  # closed by the server's lifespan (teola.server.api)
        self.documents = Documents(self.store, settings)
        self.namespaces = Namespaces(self.store, settings)
        self.tenants = Tenants.from_settings(
            settings.api_key, settings.api_keys, settings.api_keys_file, settings.secret
        )
        self.quotas = TenantQuotas(settings.tenant_max_queries, settings.tenant_tokens_per_minute)
        self.tenant_shares = parse_shares(settings.tenant_shares)
        self.recent = RecentQueries()  # what the /ui page shows (teola.server.ui)
        self.compiler = CompilePool(
            settings.compile_threads, settings.compile_queue
        )  # closed by the lifespan
        self.started = False

    def app(self, name: str) -> Any:
        """The app served as `name`; ApiError 404 naming the served apps otherwise."""
        app = self.apps.get(name)
        if app is None:
            raise ApiError(
                404,
                "unknown_app",
                f"unknown app {name!r}; apps served here: {', '.join(sorted(self.apps)) or 'none'}",
            )
        return app


def open_store(settings: ServerSettings) -> TenantStore:
    """The backend `settings.documents` names (teola.server.store.base). Nothing starts here: the
    PostgreSQL backend connects on first use, so a server whose users never upload never starts it."""
    if settings.documents == "memory":
        return MemoryStore()
    return PostgresStore(settings.pg_dsn)
