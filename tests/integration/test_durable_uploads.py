"""Acceptance (issue 60): `teola serve` in its own process on the real PostgreSQL, two tenants. One
uploads twice its cap at once and gets 429 with Retry-After beyond it; the other's uploads all
remain. After SIGKILL and a fresh start on the same database, every acknowledged upload reads back
byte for byte, nothing refused is there, and the namespaces queries recorded are listed."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest

REPO = Path(__file__).resolve().parents[2]
APP = "tests.support.served_apps:echo"
CAP = 6
RUN = uuid.uuid4().hex[:8]  # the database outlives the test: its tenants are this run's own
ALPHA, BETA = f"alpha-{RUN}", f"beta-{RUN}"
KEYS = {ALPHA: f"key-a-{RUN}", BETA: f"key-b-{RUN}"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(pg_dsn: str, port: int, log: Path) -> subprocess.Popen:
    env = os.environ | {
        "TEOLA_PG_DSN": pg_dsn,
        "TEOLA_DOCUMENTS": "postgres",
        "TEOLA_API_KEYS": ";".join(f"{t}:{k}" for t, k in KEYS.items()),
        "TEOLA_MAX_TENANT_DOCUMENTS": str(CAP),
        "TEOLA_MAX_TENANT_NAMESPACES": "2",
    }
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "teola.cli",
                "serve",
                APP,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(
                f"the server exited with {proc.returncode} during start-up:\n{log.read_text()[-3000:]}"
            )
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"the server did not become ready in 60 s:\n{log.read_text()[-3000:]}")


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def headers(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[tenant]}"}


@pytest.fixture
def cleanup(pg_dsn):
    yield
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for table in ("teola_documents", "teola_namespaces"):
            conn.execute(f"DELETE FROM {table} WHERE tenant = ANY(%s)", ([ALPHA, BETA],))


async def upload(client: httpx.AsyncClient, tenant: str, text: str) -> httpx.Response:
    return await client.post("/v1/apps/echo/documents", json={"documents": [text]}, headers=headers(tenant))


def test_acknowledged_uploads_and_namespaces_survive_sigkill_and_caps_hold_per_tenant(
    pg_dsn, cleanup, tmp_path
):
    port, log = free_port(), tmp_path / "server.log"
    alpha_texts = [f"alpha {i}: Ünïcödé ✓\r\n\ttabs, trailing spaces   \n{'x' * i}" for i in range(2 * CAP)]
    beta_texts = [f"beta {i}\n" + "β" * (i + 1) for i in range(CAP - 1)]
    proc = start_server(pg_dsn, port, log)
    try:

        async def first_run() -> tuple[list[httpx.Response], list[httpx.Response]]:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
                alpha, beta = await asyncio.gather(
                    asyncio.gather(
                        *(upload(c, ALPHA, t) for t in alpha_texts)
                    ),  # all at once: no race past the cap
                    asyncio.gather(*(upload(c, BETA, t) for t in beta_texts)),
                )
                for tenant, ns in ((ALPHA, "kb"), (BETA, "kb"), (BETA, "notes")):
                    q = {"query": {"question": "What is kept?"}, "config": {"namespace": ns}}
                    r = await c.post("/v1/apps/echo/query", json=q, headers=headers(tenant))
                    assert r.status_code == 200, r.text
                q = {"query": {"question": "One more?"}, "config": {"namespace": "third"}}
                r = await c.post("/v1/apps/echo/query", json=q, headers=headers(BETA))
                assert r.status_code == 429 and r.json()["error"] == "quota_exceeded", r.text
                return alpha, beta

        alpha, beta = asyncio.run(first_run())
        assert [r.status_code for r in beta] == [201] * len(beta_texts)
        assert sorted(r.status_code for r in alpha) == [201] * CAP + [429] * CAP
        for r in alpha:
            if r.status_code == 429:
                assert r.headers["retry-after"] == "60" and r.json()["error"] == "quota_exceeded"
                assert "max_tenant_documents" in r.json()["detail"]
        acknowledged = {
            r.json()["document_ids"][0]: (tenant, text)
            for tenant, texts, answers in ((ALPHA, alpha_texts, alpha), (BETA, beta_texts, beta))
            for text, r in zip(texts, answers)
            if r.status_code == 201
        }
        refused = [text for text, r in zip(alpha_texts, alpha) if r.status_code == 429]
    finally:
        kill(proc)  # SIGKILL: no shutdown, no flush but what was committed

    proc = start_server(pg_dsn, port, log)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
            for doc_id, (tenant, text) in acknowledged.items():
                r = c.get(f"/v1/apps/echo/documents/{doc_id}", headers=headers(tenant))
                assert r.status_code == 200 and r.content == text.encode("utf-8"), (doc_id, tenant)
                other = BETA if tenant == ALPHA else ALPHA
                assert c.get(f"/v1/apps/echo/documents/{doc_id}", headers=headers(other)).status_code == 404
            for tenant, count in ((ALPHA, CAP), (BETA, len(beta_texts))):
                listed = c.get("/v1/apps/echo/documents", headers=headers(tenant)).json()
                assert sorted(d["id"] for d in listed["documents"]) == sorted(
                    i for i, (t, _) in acknowledged.items() if t == tenant
                )
                assert listed["usage"]["documents"] == count
            from teola.server.store.documents import document_id

            for text in refused:
                assert (
                    c.get(f"/v1/apps/echo/documents/{document_id(text)}", headers=headers(ALPHA)).status_code
                    == 404
                )
            spaces = {
                t: [
                    n["namespace"]
                    for n in c.get("/v1/apps/echo/namespaces", headers=headers(t)).json()["namespaces"]
                ]
                for t in (ALPHA, BETA)
            }
            assert spaces == {ALPHA: ["kb"], BETA: ["kb", "notes"]}
    finally:
        kill(proc)
