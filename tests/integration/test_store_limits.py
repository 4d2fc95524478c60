"""The document store under pressure, on the real server code and the real PostgreSQL (issue 71):

- finding 3: what queries store in a tenant's kept namespaces is capped (chunks, bytes), tenant-wide,
  refused whole with 429 before the query runs, freed by deleting a namespace;
- finding 11: one tenant's concurrent uploads waiting on its lock hold one pooled connection, not
  all of them, so another tenant's upload answers at once; uploads count in tenant_max_queries;
- finding 12: after the embedded server's postmaster dies, the next document call starts it again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import psycopg
import pytest

from apps.advanced_rag import build as build_advanced_rag
from engines.sim.sim_engine import SimEngine
from teola import App, Engine
from teola.server import ServerSettings, create_server
from tests.support.served_apps import echo

RUN = uuid.uuid4().hex[:8]  # the database outlives the test: its tenants are this run's own
ALPHA, BETA = f"alpha-{RUN}", f"beta-{RUN}"
KEYS = {ALPHA: f"key-a-{RUN}", BETA: f"key-b-{RUN}"}
PROSE = "The Ouse flows through York; its tributaries include the Swale, the Ure and the Nidd. "


def headers(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[tenant]}"}


def settings(**kw) -> ServerSettings:
    return ServerSettings(
        documents="postgres", api_keys=";".join(f"{t}:{k}" for t, k in KEYS.items()), query_timeout=60, **kw
    )


@asynccontextmanager
async def serve(apps: dict[str, App], server_settings: ServerSettings) -> AsyncIterator[httpx.AsyncClient]:
    server = create_server(apps, server_settings)
    async with server.router.lifespan_context(server):
        transport = httpx.ASGITransport(app=server)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://teola.test", timeout=120
        ) as client:
            yield client


@pytest.fixture
def cleanup(pg_dsn):
    yield
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for table in ("teola_documents", "teola_namespaces"):
            conn.execute(f"DELETE FROM {table} WHERE tenant = ANY(%s)", ([ALPHA, BETA],))


def rag_app() -> App:
    """The advanced-RAG template on sim engines: indexing and ingestion into the query's namespace."""
    app = build_advanced_rag()
    for name, spec in list(app.engines.items()):
        app.register_engine(Engine(name, kind=spec.kind, **spec.options), backend=SimEngine(name))
    return app


def query(namespace: str, words: int, seed: int) -> dict:
    text = f"Document {seed}. " + " ".join(PROSE.split() * (words // len(PROSE.split()) + 1))[: words * 6]
    return {
        "query": {"question": "What flows through York?", "documents": [text]},
        "config": {
            "namespace": namespace,
            "nodes": {"indexing": {"chunk_size": 32, "chunk_overlap": 0, "tokenizer": "words"}},
        },
    }


# ---- finding 3 ---------------------------------------------------------------------------------------
async def test_what_queries_keep_in_namespaces_is_capped_per_tenant(pg_dsn, cleanup):
    from teola.server.store.namespaces import ingested

    one = query("kb", 300, 0)
    rows, size = ingested(rag_app().compile(one["query"], one["config"]))
    assert rows > 5 and size > 1000
    cap = 3 * rows + rows // 2  # three queries fit, a fourth does not
    async with serve({"rag": rag_app()}, settings(pg_dsn=pg_dsn, max_tenant_kept_chunks=cap)) as c:
        answers = []
        for seed, ns in enumerate(["kb", "kb", "other", "kb"]):
            r = await c.post("/v1/apps/rag/query", json=query(ns, 300, seed), headers=headers(ALPHA))
            answers.append(r)
        assert [r.status_code for r in answers[:3]] == [200, 200, 200], answers[-1].text
        refused = answers[3]
        assert refused.status_code == 429 and refused.json()["error"] == "quota_exceeded"
        assert "max_tenant_kept_chunks" in refused.json()["detail"] and refused.headers["retry-after"]
        with psycopg.connect(pg_dsn) as conn:
            kept = conn.execute(
                "SELECT namespace, chunks, bytes FROM teola_namespaces WHERE tenant = %s ORDER BY namespace",
                (ALPHA,),
            ).fetchall()
        assert kept == [("kb", 2 * rows, 2 * size), ("other", rows, size)]
        # another tenant has its own cap
        r = await c.post("/v1/apps/rag/query", json=query("kb", 300, 9), headers=headers(BETA))
        assert r.status_code == 200, r.text
        # deleting a namespace frees what its queries were charged
        assert (await c.delete("/v1/apps/rag/namespaces/kb", headers=headers(ALPHA))).status_code == 204
        r = await c.post("/v1/apps/rag/query", json=query("kb", 300, 10), headers=headers(ALPHA))
        assert r.status_code == 200, r.text
    async with serve({"rag": rag_app()}, settings(pg_dsn=pg_dsn, max_tenant_kept_bytes=size * 2)) as c:
        r = await c.post("/v1/apps/rag/query", json=query("big", 900, 11), headers=headers(BETA))
        assert r.status_code == 429 and "max_tenant_kept_bytes" in r.json()["detail"], r.text


# ---- finding 11 --------------------------------------------------------------------------------------
async def upload(c: httpx.AsyncClient, tenant: str, text: str) -> httpx.Response:
    return await c.post("/v1/apps/echo/documents", json={"documents": [text]}, headers=headers(tenant))


async def test_one_tenants_waiting_uploads_do_not_take_every_store_connection(pg_dsn, cleanup):
    async with serve({"echo": echo()}, settings(pg_dsn=pg_dsn)) as c:
        assert (await upload(c, BETA, "warm-up")).status_code == 201  # the pool is open
        # another server process holds ALPHA's lock (a long upload there): ALPHA's uploads here wait
        with psycopg.connect(pg_dsn, autocommit=True) as other:
            other.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", ("teola-tenant:" + ALPHA,))
            waiting = [asyncio.create_task(upload(c, ALPHA, f"alpha {i}")) for i in range(12)]
            await asyncio.sleep(1.0)
            r = await asyncio.wait_for(upload(c, BETA, "beta while alpha waits"), timeout=5)
            assert r.status_code == 201, r.text
            assert not any(t.done() for t in waiting)
            other.execute("SELECT pg_advisory_unlock_all()")
            done = await asyncio.wait_for(asyncio.gather(*waiting), timeout=30)
    assert [r.status_code for r in done] == [201] * 12


async def test_uploads_count_in_tenant_max_queries(pg_dsn, cleanup):
    async with serve({"echo": echo()}, settings(pg_dsn=pg_dsn, tenant_max_queries=2)) as c:
        assert (await upload(c, ALPHA, "warm-up")).status_code == 201
        with psycopg.connect(pg_dsn, autocommit=True) as other:
            other.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", ("teola-tenant:" + ALPHA,))
            waiting = [asyncio.create_task(upload(c, ALPHA, f"alpha {i}")) for i in range(2)]
            await asyncio.sleep(1.0)
            r = await asyncio.wait_for(upload(c, ALPHA, "a third at once"), timeout=5)
            assert r.status_code == 429 and r.json()["error"] == "too_many_queries", r.text
            other.execute("SELECT pg_advisory_unlock_all()")
            assert [x.status_code for x in await asyncio.gather(*waiting)] == [201, 201]


# ---- finding 12 --------------------------------------------------------------------------------------
async def test_the_store_starts_its_embedded_server_again_after_the_postmaster_dies(tmp_path, monkeypatch):
    from engines.postgres import server as pg_server

    monkeypatch.delenv(pg_server.DSN_ENV, raising=False)
    data_dir = (tmp_path / "pg").resolve()
    monkeypatch.setattr(
        pg_server, "default_data_dir", lambda: data_dir
    )  # its own server: the session's is not touched
    async with serve({"echo": echo()}, settings()) as c:
        assert (await upload(c, ALPHA, "before")).status_code == 201
        pid = pg_server.default_manager().server_pid(data_dir)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        for _ in range(100):
            if pg_server.default_manager().server_pid(data_dir) is None:
                break
            await asyncio.sleep(0.1)
        r = await asyncio.wait_for(upload(c, ALPHA, "after"), timeout=60)
        assert r.status_code == 201, r.text
        assert pg_server.default_manager().server_pid(data_dir) not in (None, pid)
        listed = (await c.get("/v1/apps/echo/documents", headers=headers(ALPHA))).json()
        assert listed["usage"]["documents"] == 2
    assert pg_server.default_manager().server_pid(data_dir) is None  # the last reference stopped it
