"""`teola.client.Client` on the server's default documents backend: PostgreSQL (the session's
embedded server, `pg_dsn`), and one that cannot be reached (503 ``store_unavailable`` as
`UnavailableError`)."""

from __future__ import annotations

import uuid

import pytest

from teola.client import NO_RETRIES, Client, NotFoundError, UnavailableError
from teola.server import ServerSettings
from tests.unit.client.conftest import served_in_thread
from tests.unit.server.test_server import make_echo_app


def test_documents_and_namespaces_kept_in_postgres(pg_dsn, tmp_path):
    tenant, key = f"client-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex  # rows of other runs stay other tenants'
    echo, llm = make_echo_app()
    settings = ServerSettings(documents="postgres", pg_dsn=pg_dsn, api_keys=f"{tenant}:{key}")
    (tmp_path / "a.txt").write_text("Stored in PostgreSQL.", encoding="utf-8")
    with served_in_thread({"echo": echo}, settings) as (url, _), Client(url, api_key=key) as c:
        ids = c.upload("echo", "A text.") + c.upload_files("echo", tmp_path / "a.txt")
        page = c.documents("echo")
        assert sorted(d.id for d in page.documents) == sorted(ids) and page.usage.documents == 2
        assert c.document("echo", ids[1]) == "Stored in PostgreSQL."
        c.query("echo", "Keep?", {"namespace": "pg-kept"})
        assert [n.name for n in c.namespaces("echo").namespaces] == ["pg-kept"]
        c.delete_namespace("echo", "pg-kept")
        for doc_id in ids:
            c.delete_document("echo", doc_id)
        with pytest.raises(NotFoundError):
            c.document("echo", ids[0])
        assert c.documents("echo").documents == [] and c.namespaces("echo").namespaces == []


def test_an_unreachable_store_is_an_unavailable_error():
    echo, _ = make_echo_app()
    nowhere = ServerSettings(pg_dsn="postgresql://nobody@127.0.0.1:1/none")
    # not retried here: the server tries the store for 5 s per request (retries: test_retries_and_events)
    with served_in_thread({"echo": echo}, nowhere) as (url, _), Client(url, retries=NO_RETRIES) as c:
        with pytest.raises(UnavailableError) as down:
            c.upload("echo", "A text.")
    assert down.value.status == 503 and down.value.code == "store_unavailable"
