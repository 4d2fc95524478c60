"""What queries store in a tenant's kept namespaces is capped (issue 71, finding 3), on both backends
(memory; PostgreSQL, marked `services`): charges add up per tenant over namespaces and apps, one
past a cap is refused whole with 429, deleting a namespace frees its charge, tenants are apart."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from teola.server import ApiError, ServerSettings
from teola.server.store.memory import MemoryStore
from teola.server.store.namespaces import Namespaces, ingested

RUN = uuid.uuid4().hex[:8]  # PostgreSQL keeps rows across runs: every tenant here is this run's own
CAPS = ServerSettings(documents="memory", max_tenant_kept_chunks=10, max_tenant_kept_bytes=1000)


@pytest.fixture
async def pg_store(pg_dsn):
    import psycopg

    from teola.server.store.postgres import PostgresStore

    store = PostgresStore()
    yield store
    await store.close()
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute("DELETE FROM teola_namespaces WHERE tenant LIKE %s", (f"k{RUN}-%",))


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.services)])
def store(request):
    return MemoryStore() if request.param == "memory" else request.getfixturevalue("pg_store")


def compiled(chunks: list[str]):
    """A compiled query whose one ingestion writes `chunks` (what `ingested` reads of it)."""
    from teola.ir.ops import PrimOp

    ingestion = SimpleNamespace(
        op=PrimOp.INGESTION,
        num_requests=len(chunks),
        inputs=("indexing.embeddings", "indexing.chunks", "sys.namespace"),
    )
    embedding = SimpleNamespace(op=PrimOp.EMBEDDING, num_requests=len(chunks), inputs=("indexing.chunks",))
    return SimpleNamespace(
        pgraph=SimpleNamespace(primitives=[embedding, ingestion]),
        inputs={"indexing.chunks": chunks, "sys.namespace": "x"},
    )


async def test_charges_add_up_per_tenant_and_one_past_a_cap_is_refused(store):
    spaces = Namespaces(store, CAPS)
    a, b = f"k{RUN}-a", f"k{RUN}-b"
    await spaces.charge(a, "rag", "kb", compiled(["x" * 10] * 4))
    await spaces.charge(a, "other_app", "notes", compiled(["é" * 5] * 4))
    assert ingested(compiled(["é" * 5] * 4)) == (4, 40)  # UTF-8 bytes
    with pytest.raises(ApiError) as refused:
        await spaces.charge(a, "rag", "kb", compiled(["y"] * 3))
    assert refused.value.status == 429 and "max_tenant_kept_chunks" in refused.value.detail
    assert "8 + 3 new chunks exceed its cap of 10" in refused.value.detail
    await spaces.charge(b, "rag", "kb", compiled(["z"] * 10))  # another tenant's own cap
    with pytest.raises(ApiError, match="max_tenant_kept_bytes"):
        await spaces.charge(f"k{RUN}-c", "rag", "big", compiled(["w" * 1001]))
    await spaces.charge(a, "rag", "kb", compiled([]))  # nothing ingested: nothing charged, nothing refused
    await spaces.charge(a, "rag", None, compiled(["q"] * 50))  # a query's own namespace is dropped at its end
    assert await spaces.forget(a, "rag", "kb")
    await spaces.charge(a, "rag", "kb", compiled(["y"] * 3))  # the deleted namespace's charge is freed
    assert [n.namespace for n in await spaces.names(a, "rag")] == ["kb"]
