"""Tenants over HTTP on sim engines: API keys map to tenants; a tenant's documents and namespaces
are invisible to the others (404, never 403); namespaces work over HTTP inside the caller's
tenant; with several tenants each tenant's LLM prompts carry its own prefix-cache salt."""

from __future__ import annotations

import hashlib
import json

import pytest

from teola.server import ServerSettings
from teola.server.tenants import Tenants, namespace_for
from tests.unit.server.test_server import DOCS, make_rag_app, serve

A, B = {"Authorization": "Bearer key-of-a"}, {"Authorization": "Bearer key-of-b"}


@pytest.fixture(scope="module")
async def tenants():
    app, sims = make_rag_app()
    settings = ServerSettings(
        api_keys="alpha:key-of-a,second-a-key;beta:key-of-b", query_timeout=30, documents="memory"
    )
    async with serve({"rag": app}, settings) as client:
        yield client, sims


async def test_keys_name_tenants_and_unknown_keys_are_401(tenants):
    c, _ = tenants
    assert (await c.get("/v1/apps", headers=A)).status_code == 200
    assert (await c.get("/v1/apps", headers={"Authorization": "Bearer second-a-key"})).status_code == 200
    assert (await c.get("/v1/apps", headers={"Authorization": "Bearer nope"})).status_code == 401
    assert (await c.get("/v1/apps")).status_code == 401


async def test_another_tenants_documents_are_404_for_read_query_and_delete(tenants):
    c, _ = tenants
    r = await c.post("/v1/apps/rag/documents", json={"documents": DOCS}, headers=A)
    assert r.status_code == 201
    ids = r.json()["document_ids"]
    q = {"query": {"question": "Who designed the Eiffel Tower?", "document_ids": ids}}
    r = await c.post("/v1/apps/rag/query", json=q, headers=B)
    assert r.status_code == 404 and r.json()["error"] == "unknown_document"
    assert (await c.delete(f"/v1/apps/rag/documents/{ids[0]}", headers=B)).status_code == 404
    assert (await c.post("/v1/apps/rag/query", json=q, headers=A)).status_code == 200  # still A's
    assert (await c.delete(f"/v1/apps/rag/documents/{ids[0]}", headers=A)).status_code == 204


async def test_namespaces_live_inside_the_tenant_and_prompts_are_salted_per_tenant(tenants):
    c, sims = tenants
    store = sims["vectordb"].store
    q = {
        "query": {"question": "Who designed the Eiffel Tower?", "documents": DOCS},
        "config": {"namespace": "kb"},
    }
    assert (await c.post("/v1/apps/rag/query", json=q, headers=A)).status_code == 200
    assert namespace_for("alpha", "kb") in store and namespace_for("beta", "kb") not in store
    asked = len(sims["llm"].requests)
    only_question = {"query": {"question": "Who designed the Eiffel Tower?"}, "config": {"namespace": "kb"}}
    r = await c.post("/v1/apps/rag/query", json=only_question, headers=B)
    assert r.status_code == 200
    b_prompts = json.dumps(sims["llm"].requests[asked:])
    assert "Gustave" not in b_prompts  # nothing of alpha's collection reached beta's prompts
    salts = {r.get("cache_salt") for r in sims["llm"].requests}
    assert len(salts) == 2 and None not in salts
    asked = len(sims["llm"].requests)
    assert (await c.post("/v1/apps/rag/query", json=only_question, headers=A)).status_code == 200
    assert "Gustave" in json.dumps(sims["llm"].requests[asked:])  # alpha's own collection answers alpha
    assert (await c.delete("/v1/apps/rag/namespaces/kb", headers=B)).status_code == 204
    assert namespace_for("alpha", "kb") in store  # beta's delete touched only beta's namespace
    assert (await c.delete("/v1/apps/rag/namespaces/kb", headers=A)).status_code == 204
    assert namespace_for("alpha", "kb") not in store


@pytest.mark.parametrize("bad", ["../x", "", "a" * 65, "a b", "{x}"])
async def test_namespace_names_are_checked(tenants, bad):
    c, _ = tenants
    q = {"query": {"question": "q?", "documents": DOCS}, "config": {"namespace": bad}}
    r = await c.post("/v1/apps/rag/query", json=q, headers=A)
    assert r.status_code == 422 and "namespace" in r.json()["detail"]


def test_key_settings_are_parsed_and_checked(tmp_path):
    f = tmp_path / "keys.json"
    f.write_text(json.dumps({"gamma": ["k1", "k2"]}))
    t = Tenants.from_settings("solo", "alpha:a1,a2;beta:b1", str(f))
    assert t.names == ["alpha", "beta", "default", "gamma"]
    assert [t.tenant_of(k) for k in ("solo", "a2", "b1", "k2", "zz")] == [
        "default",
        "alpha",
        "beta",
        "gamma",
        None,
    ]
    assert Tenants.from_settings(None, None, None).open
    with pytest.raises(ValueError, match="two tenants"):
        Tenants.from_settings(None, "alpha:same;beta:same", None)
    with pytest.raises(ValueError, match="tenant:key1"):
        Tenants.from_settings(None, "nocolon", None)
    with pytest.raises(ValueError, match="tenant name"):
        Tenants.from_settings(None, "bad name:k", None)
    with pytest.raises(ValueError, match="keys.json|JSON"):
        f.write_text("{not json")
        Tenants.from_settings(None, None, str(f))


async def test_single_tenant_servers_do_not_salt_prompts():
    app, sims = make_rag_app()
    async with serve({"rag": app}, ServerSettings(api_key="only-key")) as c:
        q = {"query": {"question": "Who designed the Eiffel Tower?", "documents": DOCS}}
        r = await c.post("/v1/apps/rag/query", json=q, headers={"Authorization": "Bearer only-key"})
        assert r.status_code == 200
        assert all("cache_salt" not in r for r in sims["llm"].requests)


def test_a_tenants_salt_needs_the_server_secret(tmp_path):
    from teola.server.tenants import Tenants, load_secret

    a, b = Tenants({"k1": "team-a"}, secret="one"), Tenants({"k1": "team-a"}, secret="two")
    assert a.salt("team-a") != b.salt("team-a")  # same name, two secrets: two salts
    assert a.salt("team-a") == Tenants({}, secret="one").salt("team-a") != a.salt("team-b")
    assert (
        a.salt("team-a") != hashlib.sha256(b"teola-tenant:team-a").hexdigest()[:32]
    )  # not from the name alone
    made = load_secret(None, tmp_path)  # no secret configured: a random one, kept for the next start
    assert len(made) == 64 and load_secret(None, tmp_path) == made
    assert (tmp_path / "server-secret").stat().st_mode & 0o777 == 0o600
