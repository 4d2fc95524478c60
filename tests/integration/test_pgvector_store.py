"""PgVectorEngine on the embedded Postgres: ingestion, top-k, namespaces, hostile text, lifecycles."""

from __future__ import annotations

import os
import uuid

import numpy as np
import psycopg
import pytest

from engines.postgres.vector_store import PgVectorEngine

DIM = 384


def unit_vectors(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def chunks(ns: str, vectors: np.ndarray, prefix: str = "chunk") -> list[dict]:
    return [
        {"namespace": ns, "text": f"{prefix} {i}", "embedding": v.tolist(), "meta": {"i": i, "ns": ns}}
        for i, v in enumerate(vectors)
    ]


def fresh_ns() -> str:
    return f"ns-{uuid.uuid4().hex[:8]}"


async def test_thousand_chunks_planted_neighbour_found(vector_store):
    ns = fresh_ns()
    vectors = unit_vectors(1000, seed=1)
    assert await vector_store.execute("ingestion", chunks(ns, vectors)) == [None] * 1000
    assert await vector_store.count(ns) == 1000
    planted = 637
    query = vectors[planted] + 0.05 * unit_vectors(1, seed=2)[0]
    [hits] = await vector_store.execute(
        "searching", [{"namespace": ns, "embedding": query.tolist(), "top_k": 5}]
    )
    assert len(hits) == 5
    assert hits[0]["text"] == f"chunk {planted}"
    assert hits[0]["meta"] == {"i": planted, "ns": ns}
    assert hits[0]["score"] > 0.99
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert hits[1]["score"] < 0.5  # the others are random directions


async def test_batched_search_answers_each_request_in_order(vector_store):
    ns = fresh_ns()
    vectors = unit_vectors(50, seed=3)
    await vector_store.execute("ingestion", chunks(ns, vectors))
    picks = [7, 0, 49, 21]
    reqs = [{"namespace": ns, "embedding": vectors[i].tolist(), "top_k": k} for k, i in enumerate(picks, 1)]
    results = await vector_store.execute("searching", reqs)
    assert [len(r) for r in results] == [1, 2, 3, 4]
    assert [r[0]["text"] for r in results] == [f"chunk {i}" for i in picks]


async def test_exact_search_is_the_brute_force_top_k_in_a_mixed_batch(vector_store):
    ns = fresh_ns()
    vectors = unit_vectors(400, seed=11)
    await vector_store.execute("ingestion", chunks(ns, vectors))
    queries = unit_vectors(6, seed=12)
    reqs = [
        {"namespace": ns, "embedding": q.tolist(), "top_k": 16, "exact": i % 2 == 0}
        for i, q in enumerate(queries)
    ]
    results = await vector_store.execute("searching", reqs)
    for i, (q, hits) in enumerate(zip(queries, results)):
        truth = [f"chunk {j}" for j in np.argsort(-(vectors @ q), kind="stable")[:16]]
        if i % 2 == 0:
            assert [h["text"] for h in hits] == truth  # exact: the brute-force order
        else:
            assert len(hits) == 16  # the index's answer: approximate, not asserted


async def test_exact_flag_must_be_a_bool(vector_store):
    with pytest.raises(ValueError, match="'exact' must be true or false"):
        await vector_store.execute(
            "searching", [{"namespace": "n", "embedding": [0.1] * DIM, "top_k": 1, "exact": "yes"}]
        )


async def test_namespaces_never_see_each_other(vector_store):
    a, b = fresh_ns(), fresh_ns()
    vectors = unit_vectors(30, seed=4)
    await vector_store.execute("ingestion", chunks(a, vectors, "alpha") + chunks(b, vectors, "beta"))
    reqs = [
        {"namespace": a, "embedding": vectors[3].tolist(), "top_k": 100},
        {"namespace": b, "embedding": vectors[3].tolist(), "top_k": 100},
        {"namespace": fresh_ns(), "embedding": vectors[3].tolist(), "top_k": 100},
    ]
    in_a, in_b, in_none = await vector_store.execute("searching", reqs)
    assert len(in_a) == 30 and len(in_b) == 30 and in_none == []
    assert all(h["text"].startswith("alpha") and h["meta"]["ns"] == a for h in in_a)
    assert all(h["text"].startswith("beta") and h["meta"]["ns"] == b for h in in_b)
    assert in_a[0]["text"] == "alpha 3" and in_b[0]["text"] == "beta 3"


HOSTILE = [
    'it\'s a "quoted" `text` with \\ backslashes \\x00 (escaped, not a NUL)',
    "'; DROP TABLE x; --",
    "'); DROP TABLE test_chunks; SELECT ('",
    "$$; DELETE FROM test_chunks; $$ \t tabs \n newlines \r\n and \\N copy markers",
    "unicode: Zürich, 東京, emoji 🦀, RTL \u202e, zero-width \u200b",
    "x" * (1 << 20),
]


async def test_hostile_text_round_trips_intact(vector_store, pg_dsn):
    ns = fresh_ns()
    vectors = unit_vectors(len(HOSTILE), seed=5)
    before = await vector_store.count()
    reqs = [
        {"namespace": ns, "text": t, "embedding": v.tolist(), "meta": {"raw": t[:200], "quote": "'\""}}
        for t, v in zip(HOSTILE, vectors)
    ]
    await vector_store.execute("ingestion", reqs)
    assert await vector_store.count() == before + len(HOSTILE)
    results = await vector_store.execute(
        "searching", [{"namespace": ns, "embedding": v.tolist(), "top_k": 1} for v in vectors]
    )
    for text, [hit] in zip(HOSTILE, results):
        assert hit["text"] == text
        assert hit["meta"] == {"raw": text[:200], "quote": "'\""}
    assert len(results[-1][0]["text"]) == 1 << 20


async def test_hostile_namespace_is_just_a_value(vector_store):
    ns = "'; DROP TABLE test_chunks; --"
    vectors = unit_vectors(2, seed=6)
    await vector_store.execute("ingestion", chunks(ns, vectors))
    [hits] = await vector_store.execute(
        "searching", [{"namespace": ns, "embedding": vectors[1].tolist(), "top_k": 5}]
    )
    assert [h["text"] for h in hits] == ["chunk 1", "chunk 0"]


@pytest.mark.parametrize("where", ["text", "meta", "namespace"])
async def test_nul_byte_rejects_the_whole_batch(vector_store, where):
    ns = fresh_ns()
    good = chunks(ns, unit_vectors(3, seed=7))
    bad = dict(good[1])
    if where == "meta":
        bad["meta"] = {"note": "a\x00b"}
    else:
        bad[where] = "a\x00b"
    total = await vector_store.count()
    with pytest.raises(ValueError, match=r"NUL character.*offset 1.*request 1|request 1.*NUL character"):
        await vector_store.execute("ingestion", [good[0], bad, good[2]])
    assert await vector_store.count() == total
    assert await vector_store.count(ns) == 0


async def test_bad_requests_raise_clear_errors(vector_store):
    with pytest.raises(ValueError, match="dim=384"):
        await vector_store.execute(
            "ingestion", [{"namespace": "n", "text": "t", "embedding": [0.1] * 3, "meta": {}}]
        )
    with pytest.raises(ValueError, match="NaN"):
        await vector_store.execute(
            "ingestion", [{"namespace": "n", "text": "t", "embedding": [float("nan")] * DIM}]
        )
    with pytest.raises(ValueError, match="top_k"):
        await vector_store.execute("searching", [{"namespace": "n", "embedding": [0.1] * DIM, "top_k": 0}])
    with pytest.raises(ValueError, match="op 'embedding'"):
        await vector_store.execute("embedding", [{"text": "x"}])
    with pytest.raises(ValueError, match="collection"):
        PgVectorEngine("v", collection="chunks; DROP TABLE x")


async def table_exists(dsn: str, table: str) -> bool:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        row = await (await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,))).fetchone()
    return bool(row[0])


async def test_ephemeral_collection_drops_namespaces_and_table(pg_dsn):
    engine = PgVectorEngine("eph", collection="test_eph", persistent=False)
    await engine.start()
    a, b = fresh_ns(), fresh_ns()
    vectors = unit_vectors(20, seed=8)
    await engine.execute("ingestion", chunks(a, vectors) + chunks(b, vectors[:5]))
    assert await engine.drop_namespace(a) == 20
    assert await engine.count(a) == 0 and await engine.count(b) == 5
    [hits] = await engine.execute(
        "searching", [{"namespace": a, "embedding": vectors[0].tolist(), "top_k": 3}]
    )
    assert hits == []
    assert await table_exists(pg_dsn, engine.table)
    await engine.stop()
    assert not await table_exists(pg_dsn, engine.table)


async def test_persistent_collection_survives_restart(pg_dsn):
    collection = f"test_persist_{os.getpid()}"
    vectors = unit_vectors(10, seed=9)
    first = PgVectorEngine("p1", collection=collection, persistent=True)
    await first.start()
    try:
        await first.execute("ingestion", chunks("tenant", vectors))
        await first.stop()
        second = PgVectorEngine("p2", collection=collection, persistent=True)
        await second.start()
        assert await second.count("tenant") == 10
        req = {"namespace": "tenant", "embedding": vectors[4].tolist(), "top_k": 1}
        [hits] = await second.execute("searching", [req])
        assert hits[0]["text"] == "chunk 4"
        with pytest.raises(ValueError, match="dim=8"):
            await PgVectorEngine("p3", collection=collection, dim=8).start()
        assert await second.drop_namespace("tenant") == 10
        await second.stop()
    finally:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute(f'DROP TABLE IF EXISTS "{collection}"')


async def test_ephemeral_tables_of_killed_processes_are_dropped(pg_dsn):
    import subprocess
    import sys

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    orphan, live = f"test_orph_{int(dead.stdout)}_0123abcd", f"test_orph_{os.getpid()}_0123abcd"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        for table in (orphan, live):
            await conn.execute(f'CREATE TABLE IF NOT EXISTS "{table}" (x int)')
    engine = PgVectorEngine("eph2", collection="test_orph", persistent=False)
    await engine.start()
    try:
        assert not await table_exists(pg_dsn, orphan)
        assert await table_exists(pg_dsn, live)
    finally:
        await engine.stop()
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute(f'DROP TABLE IF EXISTS "{live}"')
