"""What both Postgres adapters (pgvector store, full-text search) do with their psycopg pool:
open it on an acquired server, answer health probes, close it and release the server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any


async def open_pool(
    dsn: str,
    min_size: int,
    max_size: int,
    configure: Callable[[Any], Awaitable[None]] | None = None,
    *,
    check: bool = False,
    timeout: float = 30.0,
) -> Any:
    """An opened psycopg AsyncConnectionPool on `dsn` (each new connection passed to `configure`).
    `check`: every connection is tested when taken from the pool, and a broken one (its server
    restarted) replaced, instead of failing the call that took it. `timeout`: seconds a caller
    waits for a connection (PoolTimeout past it)."""
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        open=False,
        configure=configure,
        check=AsyncConnectionPool.check_connection if check else None,
        timeout=timeout,
    )
    await pool.open(wait=True)
    return pool


HEALTH_TIMEOUT = 5  # seconds to connect for a health probe


async def pool_health(pool: Any, dsn: str | None) -> bool:
    """True when the server answers `SELECT 1` on a fresh connection (False without a pool). Not
    through the pool: a pool whose connections are all busy is not a dead server, and a pool on a
    dead server waits its whole timeout reconnecting before it fails."""
    if pool is None or not dsn:
        return False
    import psycopg

    async with await psycopg.AsyncConnection.connect(
        dsn, connect_timeout=HEALTH_TIMEOUT, autocommit=True
    ) as conn:
        row = await (await conn.execute("SELECT 1")).fetchone()
    return row == (1,)


async def close_pool(pool: Any, dsn_option: str | None, data_dir: str | None) -> None:
    """Close the pool, then release the server it was opened on (engines.postgres.server.acquire_dsn)."""
    from engines.postgres.server import release_dsn

    try:
        await pool.close()
    finally:
        release_dsn(dsn_option, data_dir)
