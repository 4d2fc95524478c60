"""Acceptance (issue 60, item 4): a process SIGKILLed while it ingests a 2,000-chunk document into a
kept namespace leaves, after a restart, the whole document or none of it. The ingestion runs in a
child process through the real runtime (tests.support.staged_ingest_child: MiniLM embeddings,
pgvector on the session's Postgres); it is killed at three moments chosen from the rows it has
staged so far, then a store on the same table starts (the restart) and the namespace is counted."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from engines.postgres.vector_store import PgVectorEngine
from engines.requests import STAGING_PREFIX
from tests.support.staged_ingest_child import CHUNKS
from tests.support.waiting import until

pytestmark = pytest.mark.engines

ROOT = Path(__file__).resolve().parents[2]
KEPT = "tenant:acceptance/handbook"
MOMENTS = {"early": 1, "middle": CHUNKS // 2, "late": CHUNKS * 9 // 10}  # rows staged when killed


def child_dsn(dsn: str, name: str) -> str:
    """`dsn` with an application_name, so the test sees when the child's sessions are gone."""
    if "://" in dsn:
        return f"{dsn}{'&' if '?' in dsn else '?'}application_name={name}"
    return f"{dsn} application_name={name}"


def start_child(collection: str, dsn: str) -> subprocess.Popen:
    env = {**os.environ, "TEOLA_PG_DSN": dsn}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.staged_ingest_child", collection, KEPT],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


async def scalar(dsn: str, query: str, params: tuple = ()) -> int:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        return (await (await conn.execute(query, params)).fetchone())[0]


async def staged(dsn: str, collection: str) -> int:
    return await scalar(
        dsn, f'SELECT count(*) FROM "{collection}" WHERE starts_with(namespace, %s)', (STAGING_PREFIX,)
    )


async def kept(dsn: str, collection: str) -> int:
    return await scalar(dsn, f'SELECT count(*) FROM "{collection}" WHERE namespace = %s', (KEPT,))


async def kill_when_staged(child: subprocess.Popen, dsn: str, collection: str, rows: int) -> int:
    """SIGKILL the child once it has staged `rows` rows (or published); returns the rows staged then."""

    async def ready() -> bool:
        if child.poll() is not None:
            raise AssertionError(f"the child ended before it was killed:\n{child.stdout.read()}")
        return await staged(dsn, collection) >= rows or await kept(dsn, collection) > 0

    await until(ready, timeout=300, interval=0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    return await staged(dsn, collection)


async def test_a_kill_during_ingestion_leaves_the_document_whole_or_absent(pg_dsn):
    collection = f"test_kill_{os.getpid()}"
    first = PgVectorEngine("vectordb", collection=collection)
    await first.start()  # the table exists before the first child polls it
    await first.stop()
    seen = {}
    try:
        for moment, rows in MOMENTS.items():
            name = f"teola_kill_{moment}"
            child = start_child(collection, child_dsn(pg_dsn, name))
            at_kill = await kill_when_staged(child, pg_dsn, collection, rows)
            await until(
                lambda: scalar(
                    pg_dsn, "SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = %s", (name,)
                ),
                timeout=60,
                interval=0.05,
            )  # its sessions (and lock) are gone
            before = await kept(pg_dsn, collection)
            assert before in (0, CHUNKS), f"{moment}: {before} of {CHUNKS} chunks visible after the kill"
            restarted = PgVectorEngine("vectordb", collection=collection)
            await restarted.start()  # drops the dead writer's staged rows
            try:
                after = await restarted.count(KEPT)
                left = await staged(pg_dsn, collection)
                await restarted.drop_namespace(KEPT)  # the next moment starts from an empty namespace
            finally:
                await restarted.stop()
            seen[moment] = (at_kill, after)
            assert after == before and after in (0, CHUNKS), (
                f"{moment}: {after} of {CHUNKS} chunks after restart"
            )
            assert left == 0, f"{moment}: {left} staged rows left after restart"
        assert seen["early"][0] < CHUNKS and seen["middle"][0] < CHUNKS, seen  # killed mid-ingestion
        assert seen["early"][0] < seen["middle"][0] <= seen["late"][0] or seen["late"][1] == CHUNKS, seen
        child = start_child(collection, pg_dsn)  # not killed: the whole document arrives
        out, _ = await asyncio.to_thread(child.communicate, timeout=300)
        assert child.returncode == 0 and "published" in out, out
        assert await kept(pg_dsn, collection) == CHUNKS and await staged(pg_dsn, collection) == 0
        print(f"rows staged at each kill, chunks kept after restart: {seen}")
    finally:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute(f'DROP TABLE IF EXISTS "{collection}"')
            await conn.execute("DELETE FROM teola_staging WHERE tbl = %s", (collection,))
