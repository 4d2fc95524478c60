"""The namespace generated for a query (engines.requests.query_namespace) on the real pgvector
store (issue 71, low): its rows are recorded like a staging namespace's, dropped with their record
at the query's end, and the next store to start on the table deletes those of a killed query
(before, they stayed in the persistent table forever)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from engines.postgres.vector_store import PgVectorEngine
from tests.integration.test_pgvector_store import chunks, unit_vectors

REPO = Path(__file__).resolve().parents[2]


async def scalar(dsn: str, sql: str, params: tuple = ()) -> int:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        return (await (await conn.execute(sql, params)).fetchone())[0]


@pytest.fixture
def collection(pg_dsn):
    name = f"test_qns_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{name}"')
        conn.execute("DELETE FROM teola_staging WHERE tbl = %s", (name,))


async def test_a_generated_namespace_is_recorded_and_dropped_with_its_record(pg_dsn, collection):
    from engines.requests import query_namespace

    store = PgVectorEngine("qns", collection=collection, persistent=True)
    await store.start()
    try:
        ns = query_namespace(uuid.uuid4().hex)
        await store.execute("ingestion", chunks(ns, unit_vectors(6, seed=21)))
        recorded = "SELECT count(*) FROM teola_staging WHERE tbl = %s AND namespace = %s"
        assert await scalar(pg_dsn, recorded, (collection, ns)) == 1
        assert await store.drop_namespace(ns) == 6
        assert await scalar(pg_dsn, recorded, (collection, ns)) == 0
        await store.execute("ingestion", chunks("kept-by-a-client", unit_vectors(2, seed=22)))
        assert await scalar(pg_dsn, "SELECT count(*) FROM teola_staging WHERE tbl = %s", (collection,)) == 0
    finally:
        await store.stop()


def test_a_client_cannot_name_a_generated_namespace():
    from tests.support.query_ingest_child import build

    with pytest.raises(ValueError, match="per-query namespaces"):
        build("unused").compile({"question": "q", "documents": ["a b"]}, {"namespace": "teola:query/mine"})


async def test_the_rows_of_a_killed_query_are_deleted_by_the_next_start(pg_dsn, collection):
    env = os.environ | {"TEOLA_PG_DSN": pg_dsn}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.support.query_ingest_child", collection], cwd=REPO, env=env
    )
    count = f'SELECT count(*) FROM "{collection}"'
    try:
        rows = 0
        for _ in range(600):  # the child starts, ingests its 50 chunks and hangs in its LLM step
            await asyncio.sleep(0.1)
            assert child.poll() is None, f"the child exited with {child.returncode}"
            try:
                rows = await scalar(pg_dsn, count)
            except psycopg.errors.UndefinedTable:
                continue
            if rows:
                break
        assert rows == 50
    finally:
        child.kill()
        child.wait(30)
    await asyncio.sleep(0.5)  # the server notices the dead connections (and frees their locks)
    assert await scalar(pg_dsn, count) == 50  # nothing dropped them: the query never ended
    store = PgVectorEngine("next", collection=collection, persistent=True)
    await store.start()
    try:
        assert await store.count() == 0
    finally:
        await store.stop()
