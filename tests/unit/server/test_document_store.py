"""Documents and the namespace registry on both backends (memory; PostgreSQL, marked `services`):
content addressing, per-tenant caps that refuse an upload whole, concurrent uploads that cannot
pass a cap together, listing, reading, deleting, and tenants kept apart."""

from __future__ import annotations

import asyncio
import hashlib
import uuid

import pytest

from teola.server import ApiError, ServerSettings
from teola.server.store.base import DocumentMeta
from teola.server.store.documents import Documents, document_id
from teola.server.store.memory import MemoryStore
from teola.server.store.namespaces import Namespaces

RUN = uuid.uuid4().hex[:8]  # PostgreSQL keeps rows across runs: every tenant here is this run's own
CAPS = ServerSettings(
    documents="memory", max_tenant_documents=5, max_tenant_document_bytes=100, max_tenant_namespaces=2
)


@pytest.fixture(scope="session")
async def pg_store(pg_dsn):
    """One PostgresStore for the session, acquiring the server the way a teola server does."""
    import psycopg

    from teola.server.store.postgres import PostgresStore

    store = PostgresStore()
    yield store
    await store.close()
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        for table in ("teola_documents", "teola_namespaces"):
            await conn.execute(f"DELETE FROM {table} WHERE tenant LIKE %s", (f"t{RUN}-%",))


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.services)])
def store(request):
    return MemoryStore() if request.param == "memory" else request.getfixturevalue("pg_store")


def tenant() -> str:
    return f"t{RUN}-{uuid.uuid4().hex[:8]}"


async def test_an_id_is_the_texts_hash_and_the_same_text_is_stored_once(store):
    docs, t = Documents(store, CAPS), tenant()
    text = "Gustave Eiffel — ingénieur\n"
    ids = await docs.add(t, "rag", [text, "other", text])
    assert ids[0] == ids[2] == hashlib.sha256(text.encode()).hexdigest()[:32] == document_id(text)
    assert await docs.add(t, "rag", [text]) == [ids[0]]
    usage = await docs.usage(t)
    assert usage.documents == 2 and usage.bytes == len(text.encode()) + len("other")
    assert await docs.get_many(t, "rag", [ids[2], ids[1]]) == [text, "other"]


async def test_a_document_keeps_the_meta_of_its_first_upload(store):
    docs, t = Documents(store, CAPS), tenant()
    first = DocumentMeta(sha256="ab" * 32, name="notes/a.docx", namespace="paris")
    [doc_id] = await docs.add(t, "rag", ["text a"], [first])
    await docs.add(
        t, "rag", ["text a", "text b"], [DocumentMeta(sha256="cd" * 32, name="b.md"), DocumentMeta()]
    )
    listed = {d.id: d.meta for d in await docs.page(t, "rag", 10)}
    assert listed[doc_id] == first and listed[document_id("text b")] == DocumentMeta()


async def test_an_upload_over_a_cap_is_refused_whole_and_nothing_else_changes(store):
    docs, a, b = Documents(store, CAPS), tenant(), tenant()
    kept = await docs.add(a, "rag", ["d1", "d2", "d3", "d4"])
    others = await docs.add(b, "rag", ["b1", "b2"])
    with pytest.raises(ApiError) as refused:
        await docs.add(a, "other-app", ["d5", "d6"])  # the cap counts every app of the tenant
    err = refused.value
    assert err.status == 429 and err.code == "quota_exceeded" and err.headers == {"Retry-After": "60"}
    for words in ("max_tenant_documents", "TEOLA_MAX_TENANT_DOCUMENTS", "stores 4 documents", "DELETE"):
        assert words in err.detail
    assert (await docs.usage(a)).documents == 4
    assert await docs.get(a, "other-app", document_id("d5")) is None
    assert await docs.add(a, "rag", ["d1", "d5"]) == [kept[0], document_id("d5")]  # only d5 is new: fits
    with pytest.raises(ApiError, match="max_tenant_document_bytes"):
        await docs.add(b, "rag", ["x" * 99])
    assert await docs.get_many(b, "rag", others) == ["b1", "b2"]
    assert (await docs.usage(b)).documents == 2


async def test_concurrent_uploads_of_one_tenant_cannot_pass_the_cap_together(store):
    docs, t = Documents(store, CAPS), tenant()
    results = await asyncio.gather(
        *(docs.add(t, "rag", [f"doc {i}"]) for i in range(20)), return_exceptions=True
    )
    stored = [r for r in results if isinstance(r, list)]
    refused = [r for r in results if isinstance(r, ApiError) and r.status == 429]
    assert len(stored) == 5 and len(refused) == 15
    assert (await docs.usage(t)).documents == 5
    assert sorted(d.id for d in await docs.page(t, "rag", 100)) == sorted(ids[0] for ids in stored)


async def test_list_page_get_and_delete(store):
    docs, t = Documents(store, CAPS), tenant()
    ids = await docs.add(t, "rag", ["one", "two", "three"])
    first = await docs.page(t, "rag", 2)
    rest = await docs.page(t, "rag", 2, after=first[-1].id)
    assert [d.id for d in first + rest] == sorted(ids) and len(rest) == 1
    assert {d.id: d.bytes for d in first + rest} == {ids[0]: 3, ids[1]: 3, ids[2]: 5}
    assert all(d.created.tzinfo is not None for d in first)
    assert await docs.get(t, "rag", ids[2]) == "three"
    assert await docs.delete(t, "rag", ids[2]) and not await docs.delete(t, "rag", ids[2])
    with pytest.raises(KeyError, match=ids[2]):
        await docs.get_many(t, "rag", ids)
    assert (await docs.usage(t)).documents == 2
    with pytest.raises(ValueError, match="limit"):
        await docs.page(t, "rag", 0)


async def test_another_tenants_documents_are_unknown(store):
    docs, a, b = Documents(store, CAPS), tenant(), tenant()
    [doc] = await docs.add(a, "rag", ["secret of a"])
    assert await docs.get(b, "rag", doc) is None and await docs.page(b, "rag", 10) == []
    assert not await docs.delete(b, "rag", doc)
    with pytest.raises(KeyError):
        await docs.get_many(b, "rag", [doc])
    assert await docs.add(b, "rag", ["secret of a"]) == [doc]  # b's own copy, counted as b's
    assert await docs.delete(b, "rag", doc) and await docs.get(a, "rag", doc) == "secret of a"


async def test_namespaces_are_recorded_once_capped_listed_and_forgotten(store):
    spaces, a, b = Namespaces(store, CAPS), tenant(), tenant()
    await spaces.claim(a, "rag", "kb")
    await spaces.claim(a, "rag", "kb")
    await spaces.claim(a, "rag", None)
    await spaces.claim(a, "search", "web")
    with pytest.raises(ApiError) as refused:
        await spaces.claim(a, "rag", "third")
    assert refused.value.status == 429 and refused.value.headers == {"Retry-After": "60"}
    assert "max_tenant_namespaces" in refused.value.detail and "keeps 2 namespaces" in refused.value.detail
    await spaces.claim(a, "rag", "kb")  # a recorded one is no new one, even at the cap
    assert [n.namespace for n in await spaces.names(a, "rag")] == ["kb"]
    assert await spaces.names(b, "rag") == [] and not await spaces.forget(b, "rag", "kb")
    assert await spaces.forget(a, "search", "web")
    await spaces.claim(a, "rag", "third")
    assert [n.namespace for n in await spaces.names(a, "rag")] == ["kb", "third"]


async def test_concurrent_claims_cannot_pass_the_namespace_cap(store):
    spaces, t = Namespaces(store, CAPS), tenant()
    results = await asyncio.gather(
        *(spaces.claim(t, "rag", f"ns{i}") for i in range(8)), return_exceptions=True
    )
    assert sum(r is None for r in results) == 2 and len(await spaces.names(t, "rag")) == 2
