"""Staged ingestion into the pgvector store: what makes a query's documents appear in a kept
namespace all at once or not at all.

A query that keeps its documents (config "namespace") ingests them under a staging namespace of its
own (engines.requests.staging_namespace), in as many batches (transactions) as stage decomposition
makes; searches name that namespace only for the query that wrote it, so staged rows are invisible
to everyone else. Every transaction that writes staged rows into a persistent table also records
(table, staging namespace, owner) in the registry table `teola_staging`; the owner is the key of a
session advisory lock that the writing store holds on a connection of its own while it runs.

- `publish` moves the staged rows into the kept namespace with one UPDATE and deletes their registry
  rows in the same transaction, after checking that it moves as many rows as the runtime sent.
- The namespace generated for a query without config "namespace" (engines.requests.query_namespace)
  is recorded the same way, so `drop_orphans` deletes the rows of a killed query's namespace too;
  `discard` is how the store drops either kind at the end of its query.
- `drop_orphans` (at start) deletes the staged rows of a table whose owners' locks are all free:
  PostgreSQL releases a session's advisory locks when its connection ends, so a free lock means a
  killed or stopped writer, on this machine or another one sharing the server; a live writer's lock
  is held and its staging is left alone.
"""

from __future__ import annotations

import secrets
from typing import Any

REGISTRY = "teola_staging"
LOCK_CLASS = 0x7465_6F6C  # "teol": the first key of every owner lock, pg_advisory_lock(int4, int4)


def new_owner_key() -> int:
    """A random int4 naming one store's owner lock (the second key)."""
    return secrets.randbits(32) - 2**31


class OwnerLock:
    """The session advisory lock (LOCK_CLASS, key) held on a dedicated connection while a store runs."""

    def __init__(self, key: int) -> None:
        self.key = key
        self._conn: Any = None

    async def acquire(self, dsn: str) -> None:
        import psycopg

        if self._conn is not None:
            return
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        await conn.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, self.key))
        self._conn = conn

    async def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()  # the session ends, and its lock with it


async def ensure_registry(conn: Any) -> None:
    """Create the registry table (one per database, shared by every collection)."""
    from psycopg import sql

    await conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (tbl text NOT NULL, namespace text NOT NULL, "
            "owner integer NOT NULL, "
            "created timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (tbl, namespace, owner))"
        ).format(sql.Identifier(REGISTRY))
    )


async def register(conn: Any, table: str, namespaces: list[str], owner: int) -> None:
    """Record that `owner` staged rows of `table` under these namespaces (inside the ingesting
    transaction, so a row is never staged without its record)."""
    from psycopg import sql

    await conn.execute(
        sql.SQL(
            "INSERT INTO {} (tbl, namespace, owner) SELECT %s, unnest(%s::text[]), %s ON CONFLICT DO NOTHING"
        ).format(sql.Identifier(REGISTRY)),
        (table, namespaces, owner),
    )


class StagingMismatch(RuntimeError):
    """A staging namespace does not hold the rows its query sent: nothing of it was published."""


async def publish(conn: Any, table: str, staging: str, namespace: str, expected: int | None) -> int:
    """Move `staging`'s rows into `namespace` in one transaction; returns how many moved. When
    `expected` is given and the count differs (rows lost with a cleaned-up writer), nothing moves,
    the staged rows are dropped and StagingMismatch is raised."""
    from psycopg import sql

    t, reg = sql.Identifier(table), sql.Identifier(REGISTRY)
    try:
        async with conn.transaction():
            cur = await conn.execute(
                sql.SQL("UPDATE {} SET namespace = %s WHERE namespace = %s").format(t), (namespace, staging)
            )
            moved = cur.rowcount
            if expected is not None and moved != expected:
                raise StagingMismatch(
                    f"staging namespace {staging!r} of table {table!r} holds {moved} rows, the "
                    f"query sent {expected}; nothing was published into {namespace!r}"
                )
            await conn.execute(
                sql.SQL("DELETE FROM {} WHERE tbl = %s AND namespace = %s").format(reg), (table, staging)
            )
    except StagingMismatch:
        await discard(conn, table, staging)
        raise
    return moved


async def discard(conn: Any, table: str, staging: str) -> int:
    """Delete a staging namespace's rows and its registry rows in one transaction; returns rows deleted."""
    from psycopg import sql

    async with conn.transaction():
        cur = await conn.execute(
            sql.SQL("DELETE FROM {} WHERE namespace = %s").format(sql.Identifier(table)), (staging,)
        )
        await conn.execute(
            sql.SQL("DELETE FROM {} WHERE tbl = %s AND namespace = %s").format(sql.Identifier(REGISTRY)),
            (table, staging),
        )
        return cur.rowcount


async def drop_orphans(conn: Any, table: str, own: int) -> list[str]:
    """Discard the staging namespaces of `table` whose every owner is gone (its lock is free);
    returns them. `conn`: an autocommit connection; `own`: this store's key (never gone)."""
    from psycopg import sql

    cur = await conn.execute(
        sql.SQL("SELECT namespace, array_agg(owner) FROM {} WHERE tbl = %s GROUP BY namespace").format(
            sql.Identifier(REGISTRY)
        ),
        (table,),
    )
    dropped = []
    for staging, owners in await cur.fetchall():
        if own in owners:
            continue
        if all([await _gone(conn, key) for key in set(owners)]):
            await discard(conn, table, staging)
            dropped.append(staging)
    return dropped


async def _gone(conn: Any, key: int) -> bool:
    """Whether no session holds owner lock `key` (taken and let go at once if free)."""
    row = await (await conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, key))).fetchone()
    if row[0]:
        await conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, key))
    return bool(row[0])
