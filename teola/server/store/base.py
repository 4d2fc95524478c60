"""What the server keeps per tenant beyond one query: uploaded documents and the registry of its
kept vector-store namespaces, behind one small interface with two backends (setting ``documents``):

- ``"postgres"`` (default, `teola.server.store.postgres`): tables in the same PostgreSQL as the
  vectors; durable, so a restart loses nothing that was acknowledged.
- ``"memory"`` (`teola.server.store.memory`): dicts in the server process, for servers and tests
  without Postgres; the same API and caps, lost at exit.

`teola.server.state.open_store` picks one. Caps are checked by `teola.server.store.documents` and
`teola.server.store.namespaces` inside `locked(tenant)`, which serializes every change of one tenant, so
concurrent uploads cannot pass a cap together."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class DocumentMeta:
    """What an upload says about one document besides its text: the SHA-256 of what was sent (a
    file's bytes, or the text's UTF-8), the file's name, and the caller's namespace label."""

    sha256: str | None = None
    name: str | None = None
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """One stored document, without its text; `meta` is that of its first upload."""

    id: str
    bytes: int
    created: datetime
    meta: DocumentMeta = DocumentMeta()


@dataclass(frozen=True, slots=True)
class NamespaceInfo:
    """One kept namespace of a tenant (the name the tenant gave, not the mapped one)."""

    namespace: str
    created: datetime


@dataclass(frozen=True, slots=True)
class Usage:
    """What a tenant stores, over all apps."""

    documents: int
    bytes: int


@dataclass(frozen=True, slots=True)
class KeptUsage:
    """What queries stored in a tenant's kept namespaces, over all apps: chunks and their UTF-8 bytes."""

    chunks: int
    bytes: int


class TenantChanges(Protocol):
    """Reads and writes of one tenant inside `TenantStore.locked`: all applied at its end, or none."""

    async def usage(self) -> Usage: ...

    async def existing_ids(self, app: str, ids: list[str]) -> set[str]: ...

    async def insert_documents(
        self, app: str, docs: dict[str, str], meta: dict[str, DocumentMeta] | None = None
    ) -> None:
        """Store new `docs` (id -> text), each with its `meta` (none when left out)."""
        ...

    async def namespace_count(self) -> int: ...

    async def has_namespace(self, app: str, namespace: str) -> bool: ...

    async def insert_namespace(self, app: str, namespace: str) -> None: ...

    async def kept_usage(self) -> KeptUsage: ...

    async def add_kept(self, app: str, namespace: str, chunks: int, size: int) -> None:
        """Count `chunks` more chunks of `size` bytes in a recorded namespace (recorded if not yet)."""
        ...


class TenantStore(Protocol):
    """A backend: documents and namespace records addressed by (tenant, app, id or name)."""

    def locked(self, tenant: str) -> AbstractAsyncContextManager[TenantChanges]:
        """Changes of `tenant`, exclusive against every other `locked(tenant)`; applied together when
        the block ends without an exception (committed before it returns), discarded otherwise."""
        ...

    async def usage(self, tenant: str) -> Usage: ...

    async def texts(self, tenant: str, app: str, ids: list[str]) -> dict[str, str]:
        """The texts of those `ids` the tenant has in `app` (unknown ids are left out)."""
        ...

    async def list_documents(
        self, tenant: str, app: str, limit: int, after: str | None
    ) -> list[DocumentInfo]:
        """Up to `limit` documents in id order, starting after the id `after`."""
        ...

    async def delete_document(self, tenant: str, app: str, doc_id: str) -> bool: ...

    async def has_namespace(self, tenant: str, app: str, namespace: str) -> bool: ...

    async def list_namespaces(self, tenant: str, app: str) -> list[NamespaceInfo]: ...

    async def delete_namespace(self, tenant: str, app: str, namespace: str) -> bool: ...

    async def close(self) -> None:
        """Release what the backend holds (the Postgres pool and server); idempotent."""
        ...
