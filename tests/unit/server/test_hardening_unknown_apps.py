"""Requests for apps the server does not serve are a 404 before any quota accounting, so they add
no series to /metrics whatever names they use (teola.server.quotas.AdmissionMiddleware)."""

from __future__ import annotations

import asyncio

from teola.server import ServerSettings
from tests.support.waiting import until
from tests.unit.server.test_server import HANG, make_echo_app, serve


async def test_an_over_limit_tenant_posting_to_unknown_apps_gets_404_and_adds_no_metrics_series():
    app, llm = make_echo_app()
    settings = ServerSettings(tenant_max_queries=1, documents="memory", query_timeout=30)
    async with serve({"echo": app}, settings) as c:
        hung = asyncio.ensure_future(c.post("/v1/apps/echo/query", json={"query": {"question": HANG}}))
        await until(lambda: llm.hung >= 1)
        for i in range(5):
            r = await c.post(f"/v1/apps/random-{i}/query", json={"query": {"question": "x"}})
            assert r.status_code == 404 and r.json()["error"] == "unknown_app", r.text
        limited = await c.post("/v1/apps/echo/query", json={"query": {"question": "x"}})
        assert limited.status_code == 429
        metrics = (await c.get("/metrics")).text
        assert "random-" not in metrics
        assert 'teola_server_queries_failed_total{app="echo",reason="limited"} 1.0' in metrics
        llm.release.set()
        assert (await hung).status_code == 200
