"""The document and namespace endpoints over HTTP on sim engines and the memory backend: listing
with pages and usage, reading a text back as uploaded, 429 ``quota_exceeded`` with Retry-After for
every per-tenant cap (documents, bytes, namespaces), records forgotten with their namespace."""

from __future__ import annotations

import pytest

from teola.server import ServerSettings
from tests.unit.server.test_server import DOCS, make_rag_app, serve

A, B = {"Authorization": "Bearer key-of-a"}, {"Authorization": "Bearer key-of-b"}
URL = "/v1/apps/rag"


@pytest.fixture(scope="module")
async def client():
    app, _ = make_rag_app()
    settings = ServerSettings(
        api_keys="alpha:key-of-a;beta:key-of-b",
        query_timeout=30,
        documents="memory",
        max_tenant_documents=3,
        max_tenant_document_bytes=400,
        max_tenant_namespaces=1,
    )
    async with serve({"rag": app}, settings) as c:
        yield c


def quota_error(response, setting: str) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["retry-after"] == "60"
    body = response.json()
    assert body["error"] == "quota_exceeded" and setting in body["detail"] and "DELETE" in body["detail"]


async def test_documents_are_listed_read_back_and_capped_per_tenant(client):
    text = "Ünïcode\r\n  spaces kept\tand tabs "
    r = await client.post(f"{URL}/documents", json={"documents": [DOCS[0], text]}, headers=A)
    assert r.status_code == 201
    ids = r.json()["document_ids"]
    r = await client.get(f"{URL}/documents/{ids[1]}", headers=A)
    assert (
        r.status_code == 200
        and r.content == text.encode()
        and r.headers["content-type"].startswith("text/plain")
    )
    assert (await client.get(f"{URL}/documents/{ids[1]}", headers=B)).status_code == 404
    page = (await client.get(f"{URL}/documents", params={"limit": 1}, headers=A)).json()
    assert page["usage"] == {
        "documents": 2,
        "bytes": len(DOCS[0].encode()) + len(text.encode()),
        "max_documents": 3,
        "max_bytes": 400,
    }
    rest = (await client.get(f"{URL}/documents", params={"after": page["next_after"]}, headers=A)).json()
    assert sorted(d["id"] for d in page["documents"] + rest["documents"]) == sorted(ids)
    assert rest["next_after"] is None
    assert (await client.get(f"{URL}/documents", headers=B)).json()["documents"] == []

    quota_error(
        await client.post(f"{URL}/documents", json={"documents": ["x", "y"]}, headers=A),
        "max_tenant_documents",
    )
    quota_error(
        await client.post(f"{URL}/documents", json={"documents": ["z" * 300]}, headers=A),
        "max_tenant_document_bytes",
    )
    assert (
        len((await client.get(f"{URL}/documents", headers=A)).json()["documents"]) == 2
    )  # nothing of them stored
    r = await client.post(
        f"{URL}/documents", json={"documents": ["x", "y"]}, headers=B
    )  # beta has its own caps
    assert r.status_code == 201
    assert (await client.delete(f"{URL}/documents/{ids[0]}", headers=A)).status_code == 204
    assert (
        await client.post(f"{URL}/documents", json={"documents": ["x", "y"]}, headers=A)
    ).status_code == 201
    assert (await client.get(f"{URL}/documents", params={"limit": 0}, headers=A)).status_code == 422


async def test_namespaces_are_recorded_by_queries_capped_and_forgotten(client):
    def query(ns: str) -> dict:
        return {
            "query": {"question": "Who designed the Eiffel Tower?", "documents": DOCS},
            "config": {"namespace": ns},
        }

    assert (await client.post(f"{URL}/query", json=query("kb"), headers=A)).status_code == 200
    assert (await client.post(f"{URL}/query", json=query("kb"), headers=A)).status_code == 200
    listed = (await client.get(f"{URL}/namespaces", headers=A)).json()
    assert [n["namespace"] for n in listed["namespaces"]] == ["kb"] and listed["max_namespaces"] == 1
    assert (await client.get(f"{URL}/namespaces", headers=B)).json()["namespaces"] == []
    quota_error(await client.post(f"{URL}/query", json=query("second"), headers=A), "max_tenant_namespaces")
    assert (await client.delete(f"{URL}/namespaces/kb", headers=A)).status_code == 204
    assert (await client.get(f"{URL}/namespaces", headers=A)).json()["namespaces"] == []
    assert (await client.post(f"{URL}/query", json=query("second"), headers=A)).status_code == 200


async def test_postgres_is_reached_only_for_documents_and_its_absence_is_a_503_naming_the_fix():
    from tests.unit.server.test_server import make_echo_app

    echo, _ = make_echo_app()
    nowhere = ServerSettings(
        pg_dsn="postgresql://nobody@127.0.0.1:1/none"
    )  # the default backend, unreachable
    async with serve({"echo": echo}, nowhere) as c:
        r = await c.post("/v1/apps/echo/query", json={"query": {"question": "Still served?"}})
        assert r.status_code == 200, r.text  # a server whose users never upload never needs Postgres
        r = await c.post("/v1/apps/echo/documents", json={"documents": ["kept?"]})
        assert (
            r.status_code == 503 and r.json()["error"] == "store_unavailable" and "retry-after" in r.headers
        )
        assert "TEOLA_PG_DSN" in r.json()["detail"] and "TEOLA_DOCUMENTS=memory" in r.json()["detail"]


def test_storage_settings_from_env_and_checked():
    s = ServerSettings.from_env(
        {
            "TEOLA_DOCUMENTS": "memory",
            "TEOLA_MAX_TENANT_DOCUMENTS": "7",
            "TEOLA_MAX_TENANT_DOCUMENT_BYTES": "1000",
            "TEOLA_MAX_TENANT_NAMESPACES": "3",
            "TEOLA_PG_DSN": "postgresql://db/teola",
        }
    )
    assert (
        s.documents,
        s.max_tenant_documents,
        s.max_tenant_document_bytes,
        s.max_tenant_namespaces,
        s.pg_dsn,
    ) == ("memory", 7, 1000, 3, "postgresql://db/teola")
    assert ServerSettings().documents == "postgres"
    with pytest.raises(ValueError, match="TEOLA_DOCUMENTS"):
        ServerSettings(documents="disk")
    with pytest.raises(ValueError, match="max_tenant_namespaces"):
        ServerSettings(max_tenant_namespaces=0)
