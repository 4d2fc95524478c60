"""Uploaded documents of each tenant: content-addressed, capped per tenant, kept by a
`teola.server.store.base` backend (PostgreSQL by default: they survive a restart).

A document's id is derived from its text (`document_id`), so uploading the same text again answers
the same id and stores nothing more. A tenant sees only its own ids: another tenant's id is unknown
(404), never forbidden. An upload that would take the tenant past ``max_tenant_documents`` or
``max_tenant_document_bytes`` (totals over all its apps) is refused whole with 429."""

from __future__ import annotations

import hashlib

from teola.server.errors import quota_exceeded
from teola.server.settings import ServerSettings
from teola.server.store.base import DocumentInfo, DocumentMeta, TenantStore, Usage

ID_CHARS = 32  # hex characters of a document id: 128 bits of SHA-256
MAX_PAGE = 1000  # most documents one listing answers


def document_id(text: str) -> str:
    """The id of an uploaded text: the first 128 bits of the SHA-256 of its UTF-8 bytes, in hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:ID_CHARS]


class Documents:
    """Texts uploaded through POST /v1/apps/{app}/documents, addressed by (tenant, app, id)."""

    def __init__(self, store: TenantStore, settings: ServerSettings) -> None:
        self.store = store
        self.max_documents = settings.max_tenant_documents
        self.max_bytes = settings.max_tenant_document_bytes

    async def add(
        self, tenant: str, app: str, texts: list[str], meta: list[DocumentMeta] | None = None
    ) -> list[str]:
        """Store `texts` (all or none) and return their ids, in order; stored once committed. A text
        already stored keeps the meta of its first upload. ApiError 429 when the new ones would take
        the tenant past a cap."""
        ids = [document_id(t) for t in texts]
        wanted = dict(zip(ids, texts))
        metas = dict(zip(ids, meta)) if meta is not None else {}
        async with self.store.locked(tenant) as changes:
            known = await changes.existing_ids(app, list(wanted))
            new = {i: t for i, t in wanted.items() if i not in known}
            if new:
                usage = await changes.usage()
                self._check_caps(
                    tenant, app, usage, len(new), sum(len(t.encode("utf-8")) for t in new.values())
                )
                await changes.insert_documents(app, new, {i: metas[i] for i in new if i in metas})
        return ids

    def _check_caps(self, tenant: str, app: str, usage: Usage, count: int, size: int) -> None:
        over = None
        if usage.documents + count > self.max_documents:
            over = (
                f"{usage.documents} + {count} new documents exceed its cap of {self.max_documents} documents "
                "(setting max_tenant_documents, env TEOLA_MAX_TENANT_DOCUMENTS)"
            )
        elif usage.bytes + size > self.max_bytes:
            over = (
                f"{usage.bytes} + {size} new bytes exceed its cap of {self.max_bytes} bytes "
                "(setting max_tenant_document_bytes, env TEOLA_MAX_TENANT_DOCUMENT_BYTES)"
            )
        if over is not None:
            raise quota_exceeded(
                f"tenant {tenant!r} stores {usage.documents} documents ({usage.bytes} bytes, all apps); "
                f"{over}. "
                f"Nothing of this upload was stored. Free space with DELETE /v1/apps/{app}/documents/<id> "
                f"(GET /v1/apps/{app}/documents lists them), or ask the operator for a larger cap"
            )

    async def get_many(self, tenant: str, app: str, ids: list[str]) -> list[str]:
        """Texts of `ids` in order; KeyError naming the unknown ids."""
        found = await self.store.texts(tenant, app, list(dict.fromkeys(ids)))
        missing = [i for i in ids if i not in found]
        if missing:
            raise KeyError(
                f"unknown document id(s) {missing} for app {app!r} (upload with "
                f"POST /v1/apps/{app}/documents; GET /v1/apps/{app}/documents lists yours)"
            )
        return [found[i] for i in ids]

    async def get(self, tenant: str, app: str, doc_id: str) -> str | None:
        """The text of one document, or None when the tenant has no such id in `app`."""
        return (await self.store.texts(tenant, app, [doc_id])).get(doc_id)

    async def page(self, tenant: str, app: str, limit: int, after: str | None = None) -> list[DocumentInfo]:
        """The tenant's documents of `app` in id order, at most `limit` (1..MAX_PAGE), after the id
        `after`."""
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
        return await self.store.list_documents(tenant, app, limit, after)

    async def usage(self, tenant: str) -> Usage:
        """What the tenant stores over all apps."""
        return await self.store.usage(tenant)

    async def delete(self, tenant: str, app: str, doc_id: str) -> bool:
        """Forget one document; False when the tenant had no such id in `app`."""
        return await self.store.delete_document(tenant, app, doc_id)
