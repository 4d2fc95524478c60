"""`MemoryStore`: the ``documents = "memory"`` backend of `teola.server.store.base`, dicts in the server
process (same API and caps as Postgres; everything is lost when the process exits)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from teola.server.store.base import DocumentInfo, DocumentMeta, KeptUsage, NamespaceInfo, Usage


class _Stored:
    __slots__ = ("text", "bytes", "created", "meta")

    def __init__(self, text: str, meta: DocumentMeta | None) -> None:
        self.text = text
        self.meta = meta or DocumentMeta()
        self.bytes = len(text.encode("utf-8"))
        self.created = datetime.now(UTC)


class MemoryStore:
    """Documents and namespace records of every tenant, in memory."""

    def __init__(self) -> None:
        self._docs: dict[tuple[str, str, str], _Stored] = {}
        self._namespaces: dict[tuple[str, str, str], datetime] = {}
        self._kept: dict[tuple[str, str, str], KeptUsage] = {}  # chunks queries stored in a namespace
        self._locks: dict[str, asyncio.Lock] = {}

    @asynccontextmanager
    async def locked(self, tenant: str) -> AsyncIterator[_MemoryChanges]:
        lock = self._locks.setdefault(tenant, asyncio.Lock())
        async with lock:
            changes = _MemoryChanges(self, tenant)
            yield changes
            self._docs.update(changes.docs)
            self._namespaces.update(changes.namespaces)
            self._kept.update(changes.kept)

    async def usage(self, tenant: str) -> Usage:
        mine = [d for (t, _, _), d in self._docs.items() if t == tenant]
        return Usage(len(mine), sum(d.bytes for d in mine))

    async def texts(self, tenant: str, app: str, ids: list[str]) -> dict[str, str]:
        return {i: self._docs[(tenant, app, i)].text for i in ids if (tenant, app, i) in self._docs}

    async def list_documents(
        self, tenant: str, app: str, limit: int, after: str | None
    ) -> list[DocumentInfo]:
        ids = sorted(
            i for (t, a, i) in self._docs if t == tenant and a == app and (after is None or i > after)
        )
        docs = [(i, self._docs[(tenant, app, i)]) for i in ids[:limit]]
        return [DocumentInfo(i, d.bytes, d.created, d.meta) for i, d in docs]

    async def delete_document(self, tenant: str, app: str, doc_id: str) -> bool:
        return self._docs.pop((tenant, app, doc_id), None) is not None

    async def has_namespace(self, tenant: str, app: str, namespace: str) -> bool:
        return (tenant, app, namespace) in self._namespaces

    async def namespace_count(self, tenant: str) -> int:
        return sum(1 for (t, _, _) in self._namespaces if t == tenant)

    async def list_namespaces(self, tenant: str, app: str) -> list[NamespaceInfo]:
        return [
            NamespaceInfo(n, created)
            for (t, a, n), created in sorted(self._namespaces.items())
            if t == tenant and a == app
        ]

    async def delete_namespace(self, tenant: str, app: str, namespace: str) -> bool:
        self._kept.pop((tenant, app, namespace), None)
        return self._namespaces.pop((tenant, app, namespace), None) is not None

    async def kept_usage(self, tenant: str) -> KeptUsage:
        mine = [k for (t, _, _), k in self._kept.items() if t == tenant]
        return KeptUsage(sum(k.chunks for k in mine), sum(k.bytes for k in mine))

    async def close(self) -> None:
        pass


class _MemoryChanges:
    """One tenant's pending changes; `MemoryStore.locked` applies them when its block ends."""

    def __init__(self, store: MemoryStore, tenant: str) -> None:
        self._store = store
        self._tenant = tenant
        self.docs: dict[tuple[str, str, str], _Stored] = {}
        self.namespaces: dict[tuple[str, str, str], datetime] = {}
        self.kept: dict[tuple[str, str, str], KeptUsage] = {}

    async def usage(self) -> Usage:
        return await self._store.usage(self._tenant)

    async def existing_ids(self, app: str, ids: list[str]) -> set[str]:
        return set(await self._store.texts(self._tenant, app, ids))

    async def insert_documents(
        self, app: str, docs: dict[str, str], meta: dict[str, DocumentMeta] | None = None
    ) -> None:
        meta = meta or {}
        self.docs.update({(self._tenant, app, i): _Stored(text, meta.get(i)) for i, text in docs.items()})

    async def namespace_count(self) -> int:
        return await self._store.namespace_count(self._tenant)

    async def has_namespace(self, app: str, namespace: str) -> bool:
        return await self._store.has_namespace(self._tenant, app, namespace)

    async def insert_namespace(self, app: str, namespace: str) -> None:
        self.namespaces[(self._tenant, app, namespace)] = datetime.now(UTC)

    async def kept_usage(self) -> KeptUsage:
        mine = {key: k for key, k in self._store._kept.items() if key[0] == self._tenant} | self.kept
        return KeptUsage(sum(k.chunks for k in mine.values()), sum(k.bytes for k in mine.values()))

    async def add_kept(self, app: str, namespace: str, chunks: int, size: int) -> None:
        key = (self._tenant, app, namespace)
        if not await self.has_namespace(app, namespace) and key not in self.namespaces:
            await self.insert_namespace(app, namespace)
        was = self.kept.get(key) or self._store._kept.get(key) or KeptUsage(0, 0)
        self.kept[key] = KeptUsage(was.chunks + chunks, was.bytes + size)
