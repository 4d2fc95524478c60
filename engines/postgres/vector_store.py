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
  A request with `staging` (a query's staging namespace) also sees the rows staged under it.
- Atomic documents in a kept namespace (engines.postgres.staging): a query with config "namespace"
  ingests under its staging namespace (engines.requests.staging_namespace), which no other search
  names; once all its ingestion succeeded the runtime calls `publish_namespace(staging, namespace,
  expected)`, one transaction that moves the staged rows into the kept namespace, so other queries
  see a document whole or not at all, and a process killed mid-ingestion leaves only invisible
  staged rows, deleted by the next start of a store on that table once their writer is gone (an
  advisory lock held while a store runs tells; live writers of other processes are left alone).
- A query's generated namespace (engines.requests.query_namespace) is recorded the same way when
  rows are written under it, so the rows of a query killed before its end dropped them are deleted
  by the next start of a store on that table too, not kept forever.
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
ef_search (100), pool_min (1), pool_max (4), max_batch (256), max_efficient_batch (64), data_dir,
costs (True: ingestion's and search's costs fitted at start, engines/postgres/op_probe.py; a profile
or False: see engines/machine/op_costs.py).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from engines.machine.op_costs import check_op_costs_option
from engines.postgres import staging, tables
from engines.postgres.op_probe import vector_store_op_costs
from engines.postgres.pool import close_pool, open_pool, pool_health
from engines.postgres.tables import validate_identifier
from engines.protocol import EngineProfile, StreamEvent, profile_with
from engines.request_checks import check_no_nul, search_request
from engines.requests import PrimOp, default, is_staging, is_temporary


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
        costs: bool | str = True,
    ) -> None:
        validate_identifier(collection, "collection")
        self.costs_option = check_op_costs_option(name, "pgvector", self.ops, costs)
        if not isinstance(dim, int) or not 1 <= dim <= 16000:
            raise ValueError(f"option dim={dim!r}: must be an int in 1..16000 (the embedding size)")
        self.ranking = self.ranks_by({})
        if index not in ("hnsw", "none"):
            raise ValueError(f"option index={index!r}: use 'hnsw' or 'none' (exact scan)")
        if not 1 <= pool_min <= pool_max:
            raise ValueError(
                f"options pool_min={pool_min}, pool_max={pool_max}: need 1 <= pool_min <= pool_max"
            )
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
        self._owner = staging.OwnerLock(staging.new_owner_key())  # one key for the object: restarts keep it

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Acquire the server, create the extension, the table and its indexes, open the pool."""
        if self._pool is not None:
            return
        import psycopg

        from engines.postgres.server import acquire_dsn, describe_dsn

        self._dsn = acquire_dsn(self._dsn_option, self._data_dir)
        try:
            async with await psycopg.AsyncConnection.connect(self._dsn, autocommit=True) as conn:
                row = await self._prepare_table(conn, self._dsn)
        except psycopg.Error as exc:
            await self._owner.release()
            self._release()
            raise RuntimeError(
                f"engine {self.name!r}: cannot prepare table {self.table!r} "
                f"on {describe_dsn(self._dsn or '')}: "
                f"{exc}; the server needs the pgvector extension (CREATE EXTENSION vector) and a user "
                f"allowed to create tables"
            ) from exc

        if row is None or row[0] != self.dim:
            await self._owner.release()
            self._release()
            raise ValueError(
                f"engine {self.name!r}: table {self.table!r} already exists with embedding dim "
                f"{row[0] if row else '?'}, but option dim={self.dim}; "
                f"pick another collection= or set dim= to match"
            )
        ef_search = self.ef_search

        async def configure(conn: Any) -> None:
            from pgvector.psycopg import register_vector_async

            await register_vector_async(conn)
            await conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef_search),))
            await conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', false)")
            await conn.commit()

        self._pool = await open_pool(self._dsn, self._pool_min, self._pool_max, configure)
        scratch = {"dsn": self._dsn_option, "data_dir": self._data_dir, "dim": self.dim, "index": self.index}
        self.profile.op_costs = await vector_store_op_costs(self, self.costs_option, scratch)

    async def _prepare_table(self, conn: Any, dsn: str) -> Any:
        """Create the extension, the table and its indexes (dead tables of this collection dropped
        first on a server of our own; a persistent one registers its owner and drops orphaned staging
        tables); the row of the table's embedding column (its dimension), None when it has none."""
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        if not (self._dsn_option or os.environ.get("TEOLA_PG_DSN")):
            await tables.drop_dead_tables(conn, self.collection)
        await conn.execute(
            tables.collection_ddl(
                self.table,
                self.dim,
                self.persistent,
                self.index,
                self.hnsw_m,
                self.hnsw_ef_construction,
            )
        )
        if self.persistent:
            await staging.ensure_registry(conn)
            await self._owner.acquire(dsn)
            await staging.drop_orphans(conn, self.table, self._owner.key)
        cur = await conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'embedding'",
            (self.table,),
        )
        return await cur.fetchone()

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
            try:
                await self._owner.release()
            finally:
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
        if op == PrimOp.INGESTION:
            await self.ingest(requests)
            return [None] * len(requests)
        if op == PrimOp.SEARCHING:
            return await self.search(requests)
        raise ValueError(
            f"engine {self.name!r} (pgvector) does not support op {op!r}; it runs {sorted(self.ops)}"
        )

    async def stream(
        self, op: str, requests: list[dict[str, Any]]
    ) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        """No streaming output: yields each request's final result."""
        results = await self.execute(op, requests)
        for i, result in enumerate(results):
            yield i, StreamEvent.FINAL, result

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
        """Validate every request, then COPY them all in one transaction (which also records the
        staging and generated per-query namespaces written, engines.postgres.staging); returns the
        row count."""
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
            temporary = sorted({ns for ns, *_ in rows if is_temporary(ns)})
            if temporary and self.persistent:  # an ephemeral table dies with its process anyway
                await staging.register(conn, self.table, temporary, self._owner.key)
        return len(rows)

    # ---- search ----------------------------------------------------------------------------------

    async def search(self, requests: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """Top-k per request, namespace-filtered: one statement per search form in the batch
        (`exact: True`: an exact scan of the namespace; else the HNSW index may answer)."""
        if not requests:
            return []
        namespaces, stages, vectors, ks, exact = [], [], [], [], []
        for i, req in enumerate(requests):
            where = f"engine {self.name!r} searching request {i}"
            ns, k = search_request(req, "namespace", where)
            flag = default(req, "exact")
            if not isinstance(flag, bool):
                raise ValueError(f"{where}: 'exact' must be true or false, got {flag!r}")
            stage = req.get("staging")
            if stage is not None and not (isinstance(stage, str) and is_staging(stage)):
                raise ValueError(
                    f"{where}: 'staging' must be a staging namespace "
                    f"(engines.requests.staging_namespace), got {stage!r}"
                )
            namespaces.append(ns)
            stages.append(stage)
            vectors.append(self._vector(req.get("embedding"), where))
            ks.append(k)
            exact.append(flag)
        out: list[list[dict[str, Any]]] = [[] for _ in requests]
        async with self._pool.connection() as conn:
            for form in (True, False):
                idx = [i for i, e in enumerate(exact) if e is form]
                if not idx:
                    continue
                staged = any(stages[i] is not None for i in idx)
                params = (
                    [namespaces[i] for i in idx],
                    *([[stages[i] for i in idx]] if staged else []),
                    [vectors[i] for i in idx],
                    [ks[i] for i in idx],
                )
                cur = await conn.execute(tables.search_sql(self.table, form, staged), params)
                for pos, rid, text, meta, score in await cur.fetchall():
                    out[idx[pos - 1]].append({"text": text, "score": float(score), "id": rid, "meta": meta})
        return out

    # ---- namespaces ------------------------------------------------------------------------------

    async def drop_namespace(self, namespace: str) -> int:
        """Delete a namespace's rows; returns rows deleted. The runtime calls this at the end of a
        query for the namespace it generated for that query, and for a failed query's staging
        namespace; a namespace a client names in its config (a tenant's persistent documents) is
        never dropped by the runtime."""
        from psycopg import sql

        if self._pool is None:
            raise RuntimeError(f"engine {self.name!r} is not started: await engine.start() first")
        async with self._pool.connection() as conn:
            if is_temporary(namespace):
                return await staging.discard(conn, self.table, namespace)
            cur = await conn.execute(
                sql.SQL("DELETE FROM {} WHERE namespace = %s").format(sql.Identifier(self.table)),
                (namespace,),
            )
            return cur.rowcount

    async def publish_namespace(self, staging_ns: str, namespace: str, expected: int | None = None) -> int:
        """Move the rows staged under `staging_ns` (a query's staging namespace) into `namespace`
        in one transaction, so searches of `namespace` see all of them or none; returns rows moved.
        With `expected` (the rows the query sent), a different count publishes nothing, drops the
        staged rows and raises engines.postgres.staging.StagingMismatch."""
        if self._pool is None:
            raise RuntimeError(f"engine {self.name!r} is not started: await engine.start() first")
        if not is_staging(staging_ns) or is_staging(namespace):
            raise ValueError(
                f"engine {self.name!r}: publish_namespace moves a staging namespace into a kept one, "
                f"got {staging_ns!r} -> {namespace!r}"
            )
        check_no_nul(namespace, f"engine {self.name!r}: publish_namespace namespace")
        async with self._pool.connection() as conn:
            return await staging.publish(conn, self.table, staging_ns, namespace, expected)

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
