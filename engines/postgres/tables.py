"""The pgvector store's collection tables: their names, their DDL, the statement that searches them,
and the ephemeral tables that killed processes left behind."""

from __future__ import annotations

import re
from typing import Any

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")


def validate_identifier(value: Any, option: str) -> str:
    """A lower-case SQL identifier of at most 48 characters, or a ValueError naming `option`."""
    if not isinstance(value, str) or not _IDENT.match(value):
        raise ValueError(
            f"option {option}={value!r}: use lower-case letters, digits and '_' (not starting with a "
            f"digit, at most 48 characters)"
        )
    return value


def collection_ddl(
    table: str, dim: int, persistent: bool, index: str, hnsw_m: int, hnsw_ef_construction: int
) -> Any:
    """CREATE statements (idempotent) of a collection table, its namespace btree and, with
    index="hnsw", its HNSW cosine index. An ephemeral (not persistent) table is UNLOGGED."""
    from psycopg import sql

    t = sql.Identifier(table)
    unlogged = sql.SQL("") if persistent else sql.SQL("UNLOGGED ")
    parts = [
        sql.SQL(
            "CREATE {unlogged}TABLE IF NOT EXISTS {t} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
            "namespace text NOT NULL, text text NOT NULL, meta jsonb NOT NULL DEFAULT '{{}}', "
            "embedding vector({dim}) NOT NULL)"
        ).format(unlogged=unlogged, t=t, dim=sql.Literal(dim)),
        sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} (namespace)").format(
            i=sql.Identifier(f"{table}_ns"), t=t
        ),
    ]
    if index == "hnsw":
        parts.append(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {i} ON {t} USING hnsw (embedding vector_cosine_ops) "
                "WITH (m = {m}, ef_construction = {ef})"
            ).format(
                i=sql.Identifier(f"{table}_hnsw"),
                t=t,
                m=sql.Literal(hnsw_m),
                ef=sql.Literal(hnsw_ef_construction),
            )
        )
    return sql.SQL("; ").join(parts)


def search_sql(table: str, exact: bool, staged: bool = False) -> Any:
    """The search of a batch of `table`: a LATERAL join over the batch. HNSW serves only an ORDER BY
    on `<=>`: the same distance through `cosine_distance()` makes the planner scan the namespace and
    sort (exact). `staged`: the batch carries staging namespaces, each searched with its request's
    namespace."""
    from psycopg import sql

    distance = "cosine_distance(t.embedding, q.emb)" if exact else "t.embedding <=> q.emb"
    columns, where = ("%s::text[], %s::text[], ", "ns, stage, ") if staged else ("%s::text[], ", "ns, ")
    match = "t.namespace = ANY(ARRAY[q.ns, q.stage])" if staged else "t.namespace = q.ns"
    return sql.SQL(
        "SELECT q.idx, r.id, r.text, r.meta, r.score FROM unnest(" + columns + "%s::vector[], "
        "%s::int[]) WITH ORDINALITY AS q(" + where + "emb, k, idx) CROSS JOIN LATERAL ("
        "  SELECT t.id, t.text, t.meta, 1 - (t.embedding <=> q.emb) AS score FROM {t} t"
        "  WHERE " + match + " ORDER BY " + distance + " LIMIT q.k) r "
        "ORDER BY q.idx, r.score DESC"
    ).format(t=sql.Identifier(table))


async def drop_dead_tables(conn: Any, collection: str) -> None:
    """Drop ephemeral tables of `collection` (`<collection>_<pid>_<suffix>`) whose process is gone
    (embedded server only: pids of other machines sharing an external server cannot be checked)."""
    import psutil
    from psycopg import sql

    pattern = re.compile(rf"^{re.escape(collection)}_(\d+)_[0-9a-f]{{8}}$")
    cur = await conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE %s",
        (collection.replace("_", "\\_") + "\\_%",),
    )
    for (table,) in await cur.fetchall():
        found = pattern.match(table)
        if found and not psutil.pid_exists(int(found.group(1))):
            await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
