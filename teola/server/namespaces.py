"""The registry of each tenant's kept vector-store namespaces (``config.namespace``): recorded the
first time a query uses one, listed and forgotten through the API, capped per tenant
(``max_tenant_namespaces``), kept by the same `teola.server.store` backend as the documents."""
from __future__ import annotations

from teola.server.errors import quota_exceeded
from teola.server.settings import ServerSettings
from teola.server.store import NamespaceInfo, TenantStore


class Namespaces:
    """Namespaces of each tenant and app, by the name the tenant gave (not the mapped one)."""

    def __init__(self, store: TenantStore, settings: ServerSettings) -> None:
        self.store = store
        self.max_namespaces = settings.max_tenant_namespaces

    async def claim(self, tenant: str, app: str, namespace: str | None) -> None:
        """Record `namespace` for a query about to use it (nothing when None or already recorded).
        ApiError 429 when it would be one more than the tenant's cap, before the query runs."""
        if namespace is None or await self.store.has_namespace(tenant, app, namespace):
            return
        async with self.store.locked(tenant) as changes:
            if await changes.has_namespace(app, namespace):
                return  # a concurrent query recorded it meanwhile
            count = await changes.namespace_count()
            if count + 1 > self.max_namespaces:
                raise quota_exceeded(
                    f"tenant {tenant!r} keeps {count} namespaces (all apps), its cap (setting max_tenant_namespaces, "
                    f"env TEOLA_MAX_TENANT_NAMESPACES); namespace {namespace!r} would be one more, so the query did "
                    f"not run. Reuse one (GET /v1/apps/{app}/namespaces lists them) or free one with "
                    f"DELETE /v1/apps/{app}/namespaces/<namespace>")
            await changes.insert_namespace(app, namespace)

    async def names(self, tenant: str, app: str) -> list[NamespaceInfo]:
        """The tenant's recorded namespaces of `app`, by name."""
        return await self.store.list_namespaces(tenant, app)

    async def forget(self, tenant: str, app: str, namespace: str) -> bool:
        """Drop the record (the caller drops the vectors); False when there was none."""
        return await self.store.delete_namespace(tenant, app, namespace)
