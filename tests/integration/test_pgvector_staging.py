"""Staged ingestion on the real pgvector store (engines.postgres.staging): staged rows are invisible
but to their query, publish moves all of them in one transaction or none, and a starting store drops
the staging of dead writers only."""

from __future__ import annotations

import os
import uuid

import psycopg
import pytest

from engines.postgres import staging
from engines.postgres.vector_store import PgVectorEngine
from engines.requests import staging_namespace
from tests.integration.test_pgvector_store import chunks, unit_vectors


@pytest.fixture
async def store(pg_dsn):
    collection = f"test_stage_{os.getpid()}"
    engine = PgVectorEngine("staged", collection=collection, persistent=True)
    await engine.start()
    yield engine
    await engine.stop()
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(f'DROP TABLE IF EXISTS "{collection}"')
        await conn.execute("DELETE FROM teola_staging WHERE tbl = %s", (collection,))


async def registry(dsn: str, table: str) -> set[tuple[str, int]]:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute("SELECT namespace, owner FROM teola_staging WHERE tbl = %s", (table,))
        return set(await cur.fetchall())


def kept_name() -> str:
    return f"kept-{uuid.uuid4().hex[:8]}"


async def test_staged_rows_are_seen_only_by_their_query_until_published(store, pg_dsn):
    kept, stage = kept_name(), staging_namespace(uuid.uuid4().hex)
    vectors = unit_vectors(30, seed=11)
    for part in (slice(0, 10), slice(10, 20), slice(20, 30)):  # three batches, three transactions
        await store.execute("ingestion", chunks(stage, vectors[part]))
    assert await registry(pg_dsn, store.table) == {(stage, store._owner.key)}
    query = {"namespace": kept, "embedding": vectors[25].tolist(), "top_k": 3}
    assert await store.execute("searching", [query]) == [[]]
    [mine] = await store.execute("searching", [{**query, "staging": stage}])
    [exact] = await store.execute("searching", [{**query, "staging": stage, "exact": True}])
    assert mine[0]["text"] == exact[0]["text"] == "chunk 5"  # the third batch's 6th chunk
    assert await store.publish_namespace(stage, kept, 30) == 30
    assert await store.count(kept) == 30 and await store.count(stage) == 0
    assert await registry(pg_dsn, store.table) == set()
    [hits] = await store.execute("searching", [query])
    assert hits[0]["score"] > 0.99


async def test_a_publish_short_of_rows_publishes_nothing_and_drops_the_staging(store, pg_dsn):
    kept, stage = kept_name(), staging_namespace(uuid.uuid4().hex)
    await store.execute("ingestion", chunks(stage, unit_vectors(10, seed=12)))
    with pytest.raises(staging.StagingMismatch, match="holds 10 rows, the query sent 12"):
        await store.publish_namespace(stage, kept, 12)
    assert await store.count(kept) == 0 and await store.count(stage) == 0
    assert await registry(pg_dsn, store.table) == set()
    with pytest.raises(ValueError, match="staging namespace into a kept one"):
        await store.publish_namespace(kept, stage, None)


async def test_drop_namespace_of_a_staging_namespace_clears_its_record(store, pg_dsn):
    stage = staging_namespace(uuid.uuid4().hex)
    await store.execute("ingestion", chunks(stage, unit_vectors(5, seed=13)))
    assert await store.drop_namespace(stage) == 5
    assert await registry(pg_dsn, store.table) == set()


async def test_a_starting_store_drops_dead_writers_staging_and_keeps_live_ones(store, pg_dsn):
    live, dead = staging_namespace("live-" + uuid.uuid4().hex), staging_namespace("dead-" + uuid.uuid4().hex)
    await store.execute("ingestion", chunks(live, unit_vectors(4, seed=14)))  # `store` runs: its lock is held
    dead_key = staging.new_owner_key()  # a writer whose connection is gone: nobody holds its lock
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        await conn.execute(
            f'INSERT INTO "{store.table}" (namespace, text, embedding) '
            f"SELECT %s, 'x', array_fill(0.1, ARRAY[384])::vector FROM generate_series(1, 7)",
            (dead,),
        )
        await staging.register(conn, store.table, [dead], dead_key)
    other = PgVectorEngine("other", collection=store.collection, persistent=True)
    await other.start()  # another process sharing the server would do the same at its start
    try:
        assert await other.count(dead) == 0 and await other.count(live) == 4
        assert await registry(pg_dsn, store.table) == {(live, store._owner.key)}
    finally:
        await other.stop()
    await store.stop()
    await store.start()  # a restart in place (the supervisor's) keeps its key, so its own staging stays
    assert await store.count(live) == 4
    await store.stop()  # the writer is gone without publishing: its staging is an orphan now
    third = PgVectorEngine("third", collection=store.collection, persistent=True)
    await third.start()
    try:
        assert await third.count(live) == 0 and await registry(pg_dsn, store.table) == set()
    finally:
        await third.stop()
        await store.start()
