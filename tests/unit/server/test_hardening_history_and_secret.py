"""The /ui history is kept per tenant (one tenant's flood never flushes another's recent queries:
teola.server.recent), and the server secret is made whole or not at all, so no process ever
derives tenants' cache salts from an empty key (teola.server.tenants.load_secret)."""

from __future__ import annotations

import threading

import pytest

from teola.server import ServerSettings
from teola.server.recent import RecentQueries
from teola.server.tenants import SECRET_FILE, load_secret
from tests.unit.server.test_server import make_echo_app, serve

A, B = {"Authorization": "Bearer key-a"}, {"Authorization": "Bearer key-b"}


async def test_one_tenants_queries_do_not_flush_another_tenants_history():
    app, _ = make_echo_app()
    settings = ServerSettings(api_keys="alpha:key-a;beta:key-b", documents="memory", query_timeout=30)
    async with serve({"echo": app}, settings) as c:
        c.asgi.state.teola.recent = recent = RecentQueries(capacity=3)
        mine = await c.post("/v1/apps/echo/query", json={"query": {"question": "beta's question"}}, headers=B)
        for i in range(5):
            assert (
                await c.post("/v1/apps/echo/query", json={"query": {"question": f"alpha {i}"}}, headers=A)
            ).status_code == 200
        beta = (await c.get("/v1/ui/queries", headers=B)).json()["queries"]
        assert [q["query_id"] for q in beta] == [mine.json()["query_id"]]
        alpha = (await c.get("/v1/ui/queries", headers=A)).json()["queries"]
        assert [q["question"] for q in alpha] == ["alpha 4", "alpha 3", "alpha 2"]  # its own oldest dropped
        assert (await c.get(f"/v1/ui/queries/{mine.json()['query_id']}", headers=A)).status_code == 404
        assert recent.detail("beta", mine.json()["query_id"]) is not None


def test_an_empty_secret_file_is_refused_naming_it(tmp_path):
    (tmp_path / SECRET_FILE).write_text("")
    with pytest.raises(ValueError) as refused:
        load_secret(None, tmp_path)
    assert str(tmp_path / SECRET_FILE) in str(refused.value)


def test_processes_racing_to_make_the_secret_all_read_the_same_whole_one(tmp_path):
    start = threading.Barrier(16)
    seen: list[bytes] = []

    def make() -> None:
        start.wait()
        seen.append(load_secret(None, tmp_path))

    threads = [threading.Thread(target=make) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 16 and len(set(seen)) == 1 and len(seen[0]) == 64
    assert [p.name for p in tmp_path.iterdir()] == [SECRET_FILE], "no draft file is left behind"
