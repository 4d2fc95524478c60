"""`PostgresStore`: the ``documents = "postgres"`` backend of `teola.server.store.base`, two tables in the
same PostgreSQL as the vectors (engines.postgres.server: the ``pg_dsn`` setting, else
``TEOLA_PG_DSN``, else the embedded server).

The server is acquired and the tables created on first use, not at start-up, so a server whose
users never upload nor keep a namespace never starts Postgres; `close()` (server shutdown) releases
it. A tenant's changes run in one transaction holding a transaction-level advisory lock on the
tenant, so the cap checks and the inserts of concurrent uploads are serialized, even across server
processes sharing the database; within one process they first wait their turn without a
connection, so one tenant's concurrent uploads hold one pooled connection, not all of them.

An embedded server whose postmaster died (killed, crashed) is started again by the next call that
needs it, and every pooled connection is checked before use, so the store serves again instead of
answering 503 until the process restarts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from teola.server.errors import ApiError
from teola.server.store.base import DocumentInfo, DocumentMeta, KeptUsage, NamespaceInfo, Usage

SCHEMA = """
CREATE TABLE IF NOT EXISTS teola_documents (
    tenant text NOT NULL,
    app text NOT NULL,
    id text NOT NULL,
    text text NOT NULL,
    bytes bigint NOT NULL,
    created timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, app, id)
);
CREATE TABLE IF NOT EXISTS teola_namespaces (
    tenant text NOT NULL,
    app text NOT NULL,
    namespace text NOT NULL,
    created timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, app, namespace)
);
ALTER TABLE teola_namespaces ADD COLUMN IF NOT EXISTS chunks bigint NOT NULL DEFAULT 0;
ALTER TABLE teola_namespaces ADD COLUMN IF NOT EXISTS bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE teola_documents ADD COLUMN IF NOT EXISTS sha256 text;
ALTER TABLE teola_documents ADD COLUMN IF NOT EXISTS name text;
ALTER TABLE teola_documents ADD COLUMN IF NOT EXISTS namespace text
"""
# two servers creating the tables at once would collide in the catalog: creation takes this lock
SCHEMA_LOCK = 0x7465_6F6C_6100_0001
POOL_MIN, POOL_MAX = 1, 8
POOL_TIMEOUT = 30  # seconds a call waits for a pooled connection before its 503
CONNECT_TIMEOUT = 10  # seconds
RETRY_AFTER = "10"


class PostgresStore:
    """Documents and namespace records of every tenant, in PostgreSQL."""

    def __init__(self, dsn: str | None = None) -> None:
        self._dsn_option = dsn
        self._pool: Any = None
        self._opening = asyncio.Lock()
        self._turns: dict[str, _Turn] = {}

    async def _ready(self) -> Any:
        if self._pool is None:
            async with self._opening:
                if self._pool is None:
                    self._pool = await self._open()
        elif not server_alive(self._dsn_option):
            await self._revive()
        return self._pool

    async def _revive(self) -> None:
        from engines.postgres.server import revive_dsn

        async with self._opening:  # one restart, however many calls noticed
            if server_alive(self._dsn_option):
                return
            try:
                await asyncio.to_thread(revive_dsn, self._dsn_option)
            except Exception as exc:
                raise _unavailable(f"its embedded server died and could not be restarted ({exc})") from exc

    async def _open(self) -> Any:
        import psycopg

        from engines.postgres.pool import open_pool
        from engines.postgres.server import acquire_dsn, describe_dsn, release_dsn

        try:
            # starting the embedded server blocks for seconds: not on the event loop
            dsn = await asyncio.to_thread(acquire_dsn, self._dsn_option)
        except Exception as exc:
            raise _unavailable(f"could not start or find PostgreSQL ({type(exc).__name__}: {exc})") from exc
        try:
            # one plain connection first: a server that is not there fails at once, where the pool
            # would retry for its whole timeout
            async with await psycopg.AsyncConnection.connect(dsn, connect_timeout=CONNECT_TIMEOUT) as conn:
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                    await conn.execute(SCHEMA)
            return await open_pool(dsn, POOL_MIN, POOL_MAX, check=True, timeout=POOL_TIMEOUT)
        except Exception as exc:
            release_dsn(self._dsn_option)
            raise _unavailable(
                f"could not connect to {describe_dsn(dsn)} or create the document tables "
                f"({type(exc).__name__}: {exc})"
            ) from exc

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """A pooled connection; a database that went away is a 503 naming it, not a 500."""
        import psycopg
        from psycopg_pool import PoolTimeout

        pool = await self._ready()
        try:
            async with pool.connection() as conn:
                yield conn
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise _unavailable(f"{type(exc).__name__}: {exc}") from exc

    @asynccontextmanager
    async def locked(self, tenant: str) -> AsyncIterator[_PgChanges]:
        # the tenant's turn in this process before a connection: waiting on the advisory lock
        # (other processes) holds one connection per tenant at most
        async with self._turn(tenant), self._connection() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("teola-tenant:" + tenant,)
            )
            yield _PgChanges(conn, tenant)

    @asynccontextmanager
    async def _turn(self, tenant: str) -> AsyncIterator[None]:
        turn = self._turns.get(tenant)
        if turn is None:
            turn = self._turns[tenant] = _Turn()
        turn.users += 1
        try:
            async with turn.lock:
                yield
        finally:
            turn.users -= 1
            if not turn.users:
                del self._turns[tenant]

    async def usage(self, tenant: str) -> Usage:
        async with self._connection() as conn:
            return await _usage(conn, tenant)

    async def texts(self, tenant: str, app: str, ids: list[str]) -> dict[str, str]:
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT id, text FROM teola_documents WHERE tenant = %s AND app = %s AND id = ANY(%s)",
                (tenant, app, list(ids)),
            )
            return dict(await cur.fetchall())

    async def list_documents(
        self, tenant: str, app: str, limit: int, after: str | None
    ) -> list[DocumentInfo]:
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT id, bytes, created, sha256, name, namespace FROM teola_documents "
                "WHERE tenant = %s AND app = %s AND id > %s ORDER BY id LIMIT %s",
                (tenant, app, after or "", limit),
            )
            return [DocumentInfo(*row[:3], DocumentMeta(*row[3:])) for row in await cur.fetchall()]

    async def delete_document(self, tenant: str, app: str, doc_id: str) -> bool:
        async with self._connection() as conn:
            cur = await conn.execute(
                "DELETE FROM teola_documents WHERE tenant = %s AND app = %s AND id = %s",
                (tenant, app, doc_id),
            )
            return cur.rowcount > 0

    async def has_namespace(self, tenant: str, app: str, namespace: str) -> bool:
        async with self._connection() as conn:
            return await _has_namespace(conn, tenant, app, namespace)

    async def list_namespaces(self, tenant: str, app: str) -> list[NamespaceInfo]:
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT namespace, created FROM teola_namespaces WHERE tenant = %s AND app = %s "
                "ORDER BY namespace",
                (tenant, app),
            )
            return [NamespaceInfo(*row) for row in await cur.fetchall()]

    async def delete_namespace(self, tenant: str, app: str, namespace: str) -> bool:
        async with self._connection() as conn:
            cur = await conn.execute(
                "DELETE FROM teola_namespaces WHERE tenant = %s AND app = %s AND namespace = %s",
                (tenant, app, namespace),
            )
            return cur.rowcount > 0

    async def close(self) -> None:
        from engines.postgres.pool import close_pool

        async with self._opening:
            pool, self._pool = self._pool, None
        if pool is not None:
            await close_pool(pool, self._dsn_option, None)


class _Turn:
    """The in-process queue of one tenant's changes; dropped when nobody holds or waits for it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


def server_alive(dsn_option: str | None) -> bool:
    """False only when the embedded server this process holds has no live postmaster (an external
    server is not ours to watch: a failed call answers 503)."""
    from engines.postgres.server import embedded_alive

    return embedded_alive(dsn_option) is not False


class _PgChanges:
    """One tenant's reads and writes inside its locked transaction."""

    def __init__(self, conn: Any, tenant: str) -> None:
        self._conn = conn
        self._tenant = tenant

    async def usage(self) -> Usage:
        return await _usage(self._conn, self._tenant)

    async def existing_ids(self, app: str, ids: list[str]) -> set[str]:
        cur = await self._conn.execute(
            "SELECT id FROM teola_documents WHERE tenant = %s AND app = %s AND id = ANY(%s)",
            (self._tenant, app, list(ids)),
        )
        return {row[0] for row in await cur.fetchall()}

    async def insert_documents(
        self, app: str, docs: dict[str, str], meta: dict[str, DocumentMeta] | None = None
    ) -> None:
        meta = meta or {}
        rows = [
            (self._tenant, app, i, text, len(text.encode("utf-8")), m.sha256, m.name, m.namespace)
            for i, text in docs.items()
            for m in [meta.get(i) or DocumentMeta()]
        ]
        async with self._conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO teola_documents (tenant, app, id, text, bytes, sha256, name, namespace) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                rows,
            )

    async def namespace_count(self) -> int:
        cur = await self._conn.execute(
            "SELECT count(*) FROM teola_namespaces WHERE tenant = %s", (self._tenant,)
        )
        return (await cur.fetchone())[0]

    async def has_namespace(self, app: str, namespace: str) -> bool:
        return await _has_namespace(self._conn, self._tenant, app, namespace)

    async def insert_namespace(self, app: str, namespace: str) -> None:
        await self._conn.execute(
            "INSERT INTO teola_namespaces (tenant, app, namespace) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            (self._tenant, app, namespace),
        )

    async def kept_usage(self) -> KeptUsage:
        cur = await self._conn.execute(
            "SELECT coalesce(sum(chunks), 0), coalesce(sum(bytes), 0) FROM teola_namespaces "
            "WHERE tenant = %s",
            (self._tenant,),
        )
        chunks, size = await cur.fetchone()
        return KeptUsage(int(chunks), int(size))

    async def add_kept(self, app: str, namespace: str, chunks: int, size: int) -> None:
        await self._conn.execute(
            "INSERT INTO teola_namespaces (tenant, app, namespace, chunks, bytes) "
            "VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (tenant, app, namespace) DO UPDATE SET "
            "chunks = teola_namespaces.chunks + EXCLUDED.chunks, "
            "bytes = teola_namespaces.bytes + EXCLUDED.bytes",
            (self._tenant, app, namespace, chunks, size),
        )


async def _usage(conn: Any, tenant: str) -> Usage:
    cur = await conn.execute(
        "SELECT count(*), coalesce(sum(bytes), 0) FROM teola_documents WHERE tenant = %s", (tenant,)
    )
    count, size = await cur.fetchone()
    return Usage(int(count), int(size))


async def _has_namespace(conn: Any, tenant: str, app: str, namespace: str) -> bool:
    cur = await conn.execute(
        "SELECT 1 FROM teola_namespaces WHERE tenant = %s AND app = %s AND namespace = %s",
        (tenant, app, namespace),
    )
    return await cur.fetchone() is not None


def _unavailable(problem: str) -> ApiError:
    return ApiError(
        503,
        "store_unavailable",
        f"the document store (PostgreSQL) is unavailable: {problem}. Set pg_dsn (env TEOLA_PG_DSN) "
        "to a reachable PostgreSQL, or documents=memory (env TEOLA_DOCUMENTS=memory) to keep uploads "
        "in the server's memory (lost on restart)",
        headers={"Retry-After": RETRY_AFTER},
    )
