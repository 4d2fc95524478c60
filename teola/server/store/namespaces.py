"""The registry of each tenant's kept vector-store namespaces (``config.namespace``): recorded the
first time a query uses one, listed and forgotten through the API, capped per tenant
(``max_tenant_namespaces``), kept by the same `teola.server.store.base` backend as the documents.

What queries store in them is capped per tenant too (``max_tenant_kept_chunks``,
``max_tenant_kept_bytes``): a query is charged the chunks its compiled graph ingests before it
runs, and refused whole with 429 past a cap; deleting a namespace frees what it was charged. A
query that fails after its charge stays charged (it may have stored part) until its namespace is
deleted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from teola.ir.ops import PrimOp
from teola.server.errors import quota_exceeded
from teola.server.settings import ServerSettings
from teola.server.store.base import NamespaceInfo, TenantStore

if TYPE_CHECKING:
    from teola.compile.compiler import Compiled


class Namespaces:
    """Namespaces of each tenant and app, by the name the tenant gave (not the mapped one)."""

    def __init__(self, store: TenantStore, settings: ServerSettings) -> None:
        self.store = store
        self.max_namespaces = settings.max_tenant_namespaces
        self.max_chunks = settings.max_tenant_kept_chunks
        self.max_bytes = settings.max_tenant_kept_bytes

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
                    f"tenant {tenant!r} keeps {count} namespaces (all apps), its cap "
                    f"(setting max_tenant_namespaces, env TEOLA_MAX_TENANT_NAMESPACES); "
                    f"namespace {namespace!r} would be one more, so the query did "
                    f"not run. Reuse one (GET /v1/apps/{app}/namespaces lists them) or free one with "
                    f"DELETE /v1/apps/{app}/namespaces/<namespace>"
                )
            await changes.insert_namespace(app, namespace)

    async def charge(self, tenant: str, app: str, namespace: str | None, compiled: Compiled) -> None:
        """Count what `compiled` ingests (`ingested`) against the tenant's caps on kept chunks before
        it runs; ApiError 429 when it would take the tenant past one (nothing is charged then).
        Nothing for a query without a kept namespace."""
        if namespace is None:
            return
        rows, size = ingested(compiled)
        if rows == 0:
            return
        async with self.store.locked(tenant) as changes:
            kept = await changes.kept_usage()
            over = None
            if kept.chunks + rows > self.max_chunks:
                over = (
                    f"{kept.chunks} + {rows} new chunks exceed its cap of {self.max_chunks} "
                    "(setting max_tenant_kept_chunks, env TEOLA_MAX_TENANT_KEPT_CHUNKS)"
                )
            elif kept.bytes + size > self.max_bytes:
                over = (
                    f"{kept.bytes} + {size} new bytes exceed its cap of {self.max_bytes} "
                    "(setting max_tenant_kept_bytes, env TEOLA_MAX_TENANT_KEPT_BYTES)"
                )
            if over is not None:
                raise quota_exceeded(
                    f"tenant {tenant!r} keeps {kept.chunks} chunks ({kept.bytes} bytes) in its namespaces "
                    f"(all apps); {over}, so the query did not run. Send fewer documents, or free space with "
                    f"DELETE /v1/apps/{app}/namespaces/<namespace> (GET /v1/apps/{app}/namespaces lists them)"
                )
            await changes.add_kept(app, namespace, rows, size)

    async def names(self, tenant: str, app: str) -> list[NamespaceInfo]:
        """The tenant's recorded namespaces of `app`, by name."""
        return await self.store.list_namespaces(tenant, app)

    async def forget(self, tenant: str, app: str, namespace: str) -> bool:
        """Drop the record (the caller drops the vectors); False when there was none."""
        return await self.store.delete_namespace(tenant, app, namespace)


def ingested(compiled: Compiled) -> tuple[int, int]:
    """Rows a compiled query writes into its namespace (the requests of its ingestion primitives)
    and the UTF-8 bytes of the compile-time texts they write (its documents' chunks)."""
    rows = size = 0
    for prim in compiled.pgraph.primitives:
        if prim.op is not PrimOp.INGESTION:
            continue
        rows += prim.num_requests
        for key in prim.inputs:
            texts = compiled.inputs.get(key)
            if isinstance(texts, list):
                size += sum(len(t.encode("utf-8")) for t in texts if isinstance(t, str))
    return rows, size
