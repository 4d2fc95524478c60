"""What both Postgres adapters (pgvector store, full-text search) do with their psycopg pool:
open it on an acquired server, answer health probes, close it and release the server."""
from __future__ import annotations

from typing import Any, Awaitable, Callable


async def open_pool(dsn: str, min_size: int, max_size: int,
                    configure: Callable[[Any], Awaitable[None]] | None = None) -> Any:
    """An opened psycopg AsyncConnectionPool on `dsn` (each new connection passed to `configure`)."""
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(dsn, min_size=min_size, max_size=max_size, open=False, configure=configure)
    await pool.open(wait=True)
    return pool


async def pool_health(pool: Any) -> bool:
    """True when a pooled connection answers `SELECT 1` (False without a pool)."""
    if pool is None:
        return False
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT 1")).fetchone()
    return row == (1,)


async def close_pool(pool: Any, dsn_option: str | None, data_dir: str | None) -> None:
    """Close the pool, then release the server it was opened on (engines.pg_server.acquire_dsn)."""
    from engines.pg_server import release_dsn

    try:
        await pool.close()
    finally:
        release_dsn(dsn_option, data_dir)
