"""Vector store engine: PostgreSQL + pgvector over a psycopg 3 async connection pool.

One table per collection: (id bigint identity, namespace text, text text, meta jsonb,
embedding vector(dim)), a btree index on namespace and an HNSW cosine index on embedding.

- "ingestion" requests of a batch go in with one binary COPY inside one transaction.
- "searching" requests of a batch run as one statement (a LATERAL join over the batch), each
  filtered by its namespace: rows ingested under one namespace (a query, a tenant) are invisible to
  searches in another. HNSW runs with `hnsw.iterative_scan = strict_order` so a namespace holding a
  small share of the table still gets its full top-k. score = cosine similarity (1 - cosine distance).
  A request with `exact: True` (a query's own namespace) is ranked by an exact scan of its namespace
  instead: the index's order is approximate, and a namespace of one query's chunks is cheap to sort.
- `persistent=True` (default): the table and its rows outlive the engine. `persistent=False`
  (ephemeral): the table is UNLOGGED, named `<collection>_<unique suffix>` so concurrent processes
  never share it, `drop_namespace(ns)` (called by the runtime at query end) deletes that namespace's
  rows, and `stop()` drops the table (on the embedded server, tables left by killed processes are
  dropped by the next start).

Text handling: any str is stored byte-for-byte (quotes and SQL are data: all values are bound
parameters or COPY rows, identifiers go through `psycopg.sql.Identifier` after validation), except
NUL characters, which PostgreSQL text and jsonb cannot hold: a request whose text or meta contains
"\\x00" is rejected with a ValueError before anything of the batch is written (strip or replace NULs
upstream if your documents carry them).

Options: dsn (else TEOLA_PG_DSN, else the embedded server), collection ("teola_chunks"), dim (384),
persistent (True), index ("hnsw" or "none" = exact scan), hnsw_m (16), hnsw_ef_construction (64),
ef_search (100), pool_min (1), pool_max (4), max_batch (256), max_efficient_batch (64), data_dir.
"""
from __future__ import annotations

import json
import os
import re
import uuid
from typing import Any, AsyncIterator

import numpy as np

from engines.requests import PrimOp, default
from engines.postgres.pool import close_pool, open_pool, pool_health
from engines.request_checks import check_no_nul, search_request
from engines.protocol import EngineProfile, profile_with

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")


def validate_identifier(value: Any, option: str) -> str:
    """A lower-case SQL identifier of at most 48 characters, or a ValueError naming `option`."""
    if not isinstance(value, str) or not _IDENT.match(value):
        raise ValueError(
            f"option {option}={value!r}: use lower-case letters, digits and '_' (not starting with a "
            f"digit, at most 48 characters)"
        )
    return value


class PgVectorEngine:
    """pgvector-backed vector store (ops "ingestion", "searching")."""

    ops = frozenset({PrimOp.INGESTION, PrimOp.SEARCHING})
    default_profile = EngineProfile(max_batch=256, max_efficient_batch=256)

    @staticmethod
    def ranks_by(options: dict[str, Any]) -> str:
        return "cosine"  # searches with `exact: True` (a query's own namespace) rank exactly by it

    def __init__(
        self,
        name: str,
        *,
        dsn: str | None = None,
        collection: str = "teola_chunks",
        dim: int = 384,
        persistent: bool = True,
        index: str = "hnsw",
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        ef_search: int = 100,
        pool_min: int = 1,
        pool_max: int = 4,
        max_batch: int | None = None,
        max_efficient_batch: int | None = None,
        data_dir: str | None = None,
    ) -> None:
        validate_identifier(collection, "collection")
        if not isinstance(dim, int) or not 1 <= dim <= 16000:
            raise ValueError(f"option dim={dim!r}: must be an int in 1..16000 (the embedding size)")
        self.ranking = self.ranks_by({})
        if index not in ("hnsw", "none"):
            raise ValueError(f"option index={index!r}: use 'hnsw' or 'none' (exact scan)")
        if not 1 <= pool_min <= pool_max:
            raise ValueError(f"options pool_min={pool_min}, pool_max={pool_max}: need 1 <= pool_min <= pool_max")
        self.name = name
        self.dim = dim
        self.persistent = bool(persistent)
        self.collection = collection
        self.table = collection if self.persistent else f"{collection}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self.index = index
        self.hnsw_m = int(hnsw_m)
        self.hnsw_ef_construction = int(hnsw_ef_construction)
        self.ef_search = int(ef_search)
        self.profile = profile_with(self.default_profile, max_batch, max_efficient_batch)
        self._dsn_option = dsn
        self._data_dir = data_dir
        self._pool_min = pool_min
        self._pool_max = pool_max
        self._pool: Any = None
        self._dsn: str | None = None

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Acquire the server, create the extension, the table and its indexes, open the pool."""
        if self._pool is not None:
            return
        import psycopg
        from psycopg import sql

        from engines.postgres.server import acquire_dsn, describe_dsn

        self._dsn = acquire_dsn(self._dsn_option, self._data_dir)
        try:
            async with await psycopg.AsyncConnection.connect(self._dsn, autocommit=True) as conn:
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                if not (self._dsn_option or os.environ.get("TEOLA_PG_DSN")):
                    await self._drop_orphans(conn, sql)
                await conn.execute(self._ddl(sql))
                cur = await conn.execute(
                    "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'embedding'",
                    (self.table,),
                )
                row = await cur.fetchone()
        except psycopg.Error as exc:
            self._release()
            raise RuntimeError(
                f"engine {self.name!r}: cannot prepare table {self.table!r} on {describe_dsn(self._dsn or '')}: "
                f"{exc}; the server needs the pgvector extension (CREATE EXTENSION vector) and a user "
                f"allowed to create tables"
            ) from exc

        if row is None or row[0] != self.dim:
            self._release()
            raise ValueError(
                f"engine {self.name!r}: table {self.table!r} already exists with embedding dim "
                f"{row[0] if row else '?'}, but option dim={self.dim}; pick another collection= or set dim= to match"
            )
        ef_search = self.ef_search

        async def configure(conn: Any) -> None:
            from pgvector.psycopg import register_vector_async

            await register_vector_async(conn)
            await conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef_search),))
            await conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', false)")
            await conn.commit()

        self._pool = await open_pool(self._dsn, self._pool_min, self._pool_max, configure)

    async def _drop_orphans(self, conn: Any, sql: Any) -> None:
        """Drop ephemeral tables of this collection left by killed processes (embedded server only:
        pids of other machines sharing an external server cannot be checked)."""
        import psutil

        pattern = re.compile(rf"^{re.escape(self.collection)}_(\d+)_[0-9a-f]{{8}}$")
        cur = await conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE %s",
            (self.collection.replace("_", "\\_") + "\\_%",),
        )
        for (table,) in await cur.fetchall():
            found = pattern.match(table)
            if found and not psutil.pid_exists(int(found.group(1))):
                await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))

    def _ddl(self, sql: Any) -> Any:
        t = sql.Identifier(self.table)
        unlogged = sql.SQL("") if self.persistent else sql.SQL("UNLOGGED ")
        parts = [
            sql.SQL(
                "CREATE {unlogged}TABLE IF NOT EXISTS {t} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                "namespace text NOT NULL, text text NOT NULL, meta jsonb NOT NULL DEFAULT '{{}}', "
                "embedding vector({dim}) NOT NULL)"
            ).format(unlogged=unlogged, t=t, dim=sql.Literal(self.dim)),
            sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} (namespace)").format(
                i=sql.Identifier(f"{self.table}_ns"), t=t
            ),
        ]
        if self.index == "hnsw":
            parts.append(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {i} ON {t} USING hnsw (embedding vector_cosine_ops) "
                    "WITH (m = {m}, ef_construction = {ef})"
                ).format(
                    i=sql.Identifier(f"{self.table}_hnsw"), t=t,
                    m=sql.Literal(self.hnsw_m), ef=sql.Literal(self.hnsw_ef_construction),
                )
            )
        return sql.SQL("; ").join(parts)

    async def stop(self) -> None:
        """Close the pool; ephemeral collections drop their table first."""
        if self._pool is None:
            return
        try:
            if not self.persistent:
                from psycopg import sql

                async with self._pool.connection() as conn:
                    await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(self.table)))
        finally:
            pool, self._pool = self._pool, None
            await close_pool(pool, self._dsn_option, self._data_dir)

    def _release(self) -> None:
        from engines.postgres.server import release_dsn

        release_dsn(self._dsn_option, self._data_dir)

    async def health(self) -> bool:
        """True when the server answers `SELECT 1` (engines.postgres.pool.pool_health)."""
        return await pool_health(self._pool, self._dsn)

    # ---- protocol --------------------------------------------------------------------------------

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """Run one batch: "ingestion" -> [None, ...]; "searching" -> [[{text, score, id, meta}], ...]."""
        if self._pool is None:
            raise RuntimeError(f"engine {self.name!r} is not started: await engine.start() first")
        if op == "ingestion":
            await self.ingest(requests)
            return [None] * len(requests)
        if op == "searching":
            return await self.search(requests)
        raise ValueError(f"engine {self.name!r} (pgvector) does not support op {op!r}; it runs {sorted(self.ops)}")

    async def stream(self, op: str, requests: list[dict[str, Any]]) -> AsyncIterator[tuple[int, str, Any]]:
        """No streaming output: yields each request's final result."""
        results = await self.execute(op, requests)
        for i, result in enumerate(results):
            yield i, "final", result

    # ---- ingestion -------------------------------------------------------------------------------

    def _vector(self, value: Any, where: str) -> np.ndarray:
        try:
            vec = np.asarray(value, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: embedding must be a list of numbers ({exc})") from exc
        if vec.shape != (self.dim,):
            raise ValueError(
                f"{where}: embedding has shape {vec.shape}, the collection {self.collection!r} holds "
                f"dim={self.dim}; set the engine option dim= to the embedding model's size"
            )
        if not np.isfinite(vec).all():
            raise ValueError(f"{where}: embedding contains NaN or infinity")
        return vec

    def _ingest_row(self, i: int, req: dict[str, Any]) -> tuple[str, str, str, np.ndarray]:
        where = f"engine {self.name!r} ingestion request {i}"
        if not isinstance(req, dict):
            raise TypeError(f"{where}: expected a dict, got {type(req).__name__}")
        ns, text, meta = req.get("namespace"), req.get("text"), req.get("meta") or {}
        if not isinstance(ns, str):
            raise ValueError(f"{where}: 'namespace' must be a str, got {type(ns).__name__}")
        if not isinstance(text, str):
            raise ValueError(f"{where}: 'text' must be a str, got {type(text).__name__}")
        if not isinstance(meta, dict):
            raise ValueError(f"{where}: 'meta' must be a dict, got {type(meta).__name__}")
        check_no_nul(ns, f"{where}: namespace")
        check_no_nul(text, f"{where}: text")
        check_no_nul(meta, f"{where}: meta")
        try:
            meta_json = json.dumps(meta, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: 'meta' must be JSON-serializable ({exc})") from exc
        return ns, text, meta_json, self._vector(req.get("embedding"), where)

    async def ingest(self, requests: list[dict[str, Any]]) -> int:
        """Validate every request, then COPY them all in one transaction; returns the row count."""
        from psycopg import sql
        from psycopg.types.json import Jsonb

        rows = [self._ingest_row(i, r) for i, r in enumerate(requests)]
        if not rows:
            return 0
        query = sql.SQL("COPY {} (namespace, text, meta, embedding) FROM STDIN WITH (FORMAT BINARY)").format(
            sql.Identifier(self.table)
        )
        async with self._pool.connection() as conn:
            async with conn.cursor() as cur:
                async with cur.copy(query) as copy:
                    copy.set_types(["text", "text", "jsonb", "vector"])
                    for ns, text, meta_json, vec in rows:
                        await copy.write_row((ns, text, Jsonb(meta_json, dumps=_as_is), vec))
        return len(rows)

    # ---- search ----------------------------------------------------------------------------------

    async def search(self, requests: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """Top-k per request, namespace-filtered: one statement per search form in the batch
        (`exact: True`: an exact scan of the namespace; else the HNSW index may answer)."""
        if not requests:
            return []
        namespaces, vectors, ks, exact = [], [], [], []
        for i, req in enumerate(requests):
            where = f"engine {self.name!r} searching request {i}"
            ns, k = search_request(req, "namespace", where)
            flag = default(req, "exact")
            if not isinstance(flag, bool):
                raise ValueError(f"{where}: 'exact' must be true or false, got {flag!r}")
            namespaces.append(ns)
            vectors.append(self._vector(req.get("embedding"), where))
            ks.append(k)
            exact.append(flag)
        out: list[list[dict[str, Any]]] = [[] for _ in requests]
        async with self._pool.connection() as conn:
            for form in (True, False):
                idx = [i for i, e in enumerate(exact) if e is form]
                if not idx:
                    continue
                cur = await conn.execute(self._search_sql(form), ([namespaces[i] for i in idx],
                                                                  [vectors[i] for i in idx], [ks[i] for i in idx]))
                for pos, rid, text, meta, score in await cur.fetchall():
                    out[idx[pos - 1]].append({"text": text, "score": float(score), "id": rid, "meta": meta})
        return out

    def _search_sql(self, exact: bool) -> Any:
        """A LATERAL join over the batch. HNSW serves only an ORDER BY on `<=>`: the same distance
        through `cosine_distance()` makes the planner scan the namespace and sort (exact)."""
        from psycopg import sql

        distance = "cosine_distance(t.embedding, q.emb)" if exact else "t.embedding <=> q.emb"
        return sql.SQL("SELECT q.idx, r.id, r.text, r.meta, r.score FROM unnest(%s::text[], %s::vector[], %s::int[]) "
                       "WITH ORDINALITY AS q(ns, emb, k, idx) CROSS JOIN LATERAL ("
                       "  SELECT t.id, t.text, t.meta, 1 - (t.embedding <=> q.emb) AS score FROM {t} t"
                       "  WHERE t.namespace = q.ns ORDER BY " + distance + " LIMIT q.k) r "
                       "ORDER BY q.idx, r.score DESC").format(t=sql.Identifier(self.table))

    # ---- namespaces ------------------------------------------------------------------------------

    async def drop_namespace(self, namespace: str) -> int:
        """Delete a namespace's rows; returns rows deleted. The runtime calls this at the end of a
        query for the namespace it generated for that query; a namespace a client names in its
        config (a tenant's persistent documents) is never dropped by the runtime."""
        from psycopg import sql

        if self._pool is None:
            raise RuntimeError(f"engine {self.name!r} is not started: await engine.start() first")
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                sql.SQL("DELETE FROM {} WHERE namespace = %s").format(sql.Identifier(self.table)), (namespace,)
            )
            return cur.rowcount

    async def count(self, namespace: str | None = None) -> int:
        """Rows in the collection (in one namespace if given)."""
        from psycopg import sql

        t = sql.Identifier(self.table)
        async with self._pool.connection() as conn:
            if namespace is None:
                cur = await conn.execute(sql.SQL("SELECT count(*) FROM {}").format(t))
            else:
                query = sql.SQL("SELECT count(*) FROM {} WHERE namespace = %s").format(t)
                cur = await conn.execute(query, (namespace,))
            row = await cur.fetchone()
        return int(row[0])


def _as_is(text: str) -> str:
    return text

