"""The /ui page's assets and JSON endpoints on simulated engines, with two tenants' API keys on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from teola.server import ServerSettings
from tests.unit.server.test_server import QUERY, make_rag_app, serve

ALICE, BOB = {"Authorization": "Bearer ka"}, {"Authorization": "Bearer kb"}


@pytest.fixture(scope="module")
async def ui_env() -> AsyncIterator[dict[str, Any]]:
    rag, _ = make_rag_app()
    async with serve(
        {"advanced_rag": rag}, ServerSettings(api_keys="alice:ka;bob:kb", query_timeout=30)
    ) as client:
        yield {"client": client, "rag": rag}


async def test_page_and_assets_are_public_and_shipped(ui_env):
    c = ui_env["client"]
    page = await c.get("/ui")
    assert page.status_code == 200 and '<script src="/ui/static/ui.js">' in page.text
    js = await c.get("/ui/static/ui.js")
    assert (
        js.status_code == 200
        and js.headers["content-type"].startswith("text/javascript")
        and "drawTimeline" in js.text
    )
    assert (await c.get("/ui/static/ui.css")).status_code == 200
    assert (await c.get("/ui/static/..%2Fui.py")).status_code == 404
    assert "http://" not in page.text.replace('xmlns="http://www.w3.org', "") and "https://" not in js.text


async def test_data_needs_a_key(ui_env):
    for path in ("/v1/ui/queries", "/v1/ui/engines", "/v1/ui/apps/advanced_rag/graph"):
        assert (await ui_env["client"].get(path)).status_code == 401, path


async def test_queries_belong_to_their_tenant_with_timeline(ui_env):
    c = ui_env["client"]
    r = await c.post("/v1/apps/advanced_rag/query", json={"query": QUERY}, headers=ALICE)
    assert r.status_code == 200, r.text
    qid = r.json()["query_id"]
    mine = (await c.get("/v1/ui/queries", headers=ALICE)).json()["queries"]
    assert (
        mine[0]["query_id"] == qid and mine[0]["status"] == "ok" and mine[0]["question"] == QUERY["question"]
    )
    assert qid not in [q["query_id"] for q in (await c.get("/v1/ui/queries", headers=BOB)).json()["queries"]]
    assert (await c.get(f"/v1/ui/queries/{qid}", headers=BOB)).status_code == 404
    d = (await c.get(f"/v1/ui/queries/{qid}", headers=ALICE)).json()
    names = {t["primitive"] for t in d["trace"]}
    assert set(d["parents"]) == names and d["critical_path"] and set(d["critical_path"]) <= names
    last = max(d["trace"], key=lambda t: (t["finished"], -t["depth"]))  # a decode, not its fused prefill
    assert d["critical_path"][-1] == last["primitive"]
    for a, b in zip(d["critical_path"], d["critical_path"][1:]):
        assert a in d["parents"][b]
    assert set(d["batch_mates"]) <= names


async def test_concurrent_queries_show_up_as_batch_mates(ui_env):
    c = ui_env["client"]
    rs = await asyncio.gather(
        *(c.post("/v1/apps/advanced_rag/query", json={"query": QUERY}, headers=ALICE) for _ in range(4))
    )
    ids = [r.json()["query_id"] for r in rs]
    details = [(await c.get(f"/v1/ui/queries/{q}", headers=ALICE)).json() for q in ids]
    shared = [(d["query_id"], m) for d in details for m in d["batch_mates"].values() if m["queries"]]
    assert shared, "four concurrent queries never shared an engine batch"
    for qid, m in shared:
        assert (
            m["requests"] >= 1
            and qid not in m["queries"]
            and set(m["queries"])
            <= set(ids)
            | {q["query_id"] for q in (await c.get("/v1/ui/queries", headers=ALICE)).json()["queries"]}
        )


async def test_graph_and_engines(ui_env):
    c, rag = ui_env["client"], ui_env["rag"]
    g = (await c.get("/v1/ui/apps/advanced_rag/graph", headers=ALICE)).json()
    egraph = rag.compile(rag.placeholder_query()).egraph
    assert len(g["nodes"]) == len(egraph) and len(g["edges"]) == egraph.nx.number_of_edges()
    assert {n["op"] for n in g["nodes"]} >= {"prefilling", "searching", "reranking"}
    engines = (await c.get("/v1/ui/engines", headers=BOB)).json()["engines"]
    assert {e["engine"] for e in engines} == {"llm", "embedding", "vectordb", "reranker"}
    assert all(e["started"] and e["capacity"] >= 1 and 0 <= e["utilisation"] <= 1 for e in engines)
    sample = (await c.get("/v1/ui/apps/advanced_rag/sample", headers=BOB)).json()
    assert sample["query"]["question"] and sample["query"]["documents"]
