"""Per-tenant limits on the real engines: a tenant that sends 200 queries at once gets 429s beyond
its limit while another tenant's queries, sent during the flood, all answer; every accepted query
answers (nothing lost). A second server with two tenants runs on the session server's started
apps (naive RAG: vLLM, MiniLM, pgvector). Latency figures are the benchmark's
(`python -m bench.overheads --study tenants`), not asserted here."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from teola.server import ServerSettings, create_server

pytestmark = pytest.mark.engines

KEYS = "flood:flood-key;steady:steady-key"
FLOOD, STEADY = {"Authorization": "Bearer flood-key"}, {"Authorization": "Bearer steady-key"}
LIMIT = 3


class Lent:
    """A started app lent to a second server: that server's shutdown leaves its engines running."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def stop(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)


async def test_a_flooding_tenant_is_limited_and_the_other_tenant_is_served(e2e_client):
    app = e2e_client.teola_server.state.teola.apps["naive_rag"]
    query, _ = app.sample()
    server = create_server(
        {"naive_rag": Lent(app)},
        ServerSettings(api_keys=KEYS, tenant_max_queries=LIMIT, documents="memory", query_timeout=600),
    )
    async with server.router.lifespan_context(server):
        transport = httpx.ASGITransport(app=server)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://teola.test", timeout=600
        ) as client:

            def send(headers: dict[str, str]) -> asyncio.Future:
                return asyncio.ensure_future(
                    client.post("/v1/apps/naive_rag/query", json={"query": query}, headers=headers)
                )

            flood = [send(FLOOD) for _ in range(200)]
            steady = []
            for _ in range(3):
                await asyncio.sleep(0.5)
                steady.append(send(STEADY))
            flood_answers = await asyncio.gather(*flood)
            steady_answers = await asyncio.gather(*steady)
    codes = [r.status_code for r in flood_answers]
    assert set(codes) <= {200, 429}, sorted(set(codes))
    assert codes.count(200) >= LIMIT and codes.count(429) >= 200 - 4 * LIMIT
    for r in flood_answers:
        if r.status_code == 200:
            assert isinstance(r.json()["output"], str) and r.json()["output"]  # accepted: answered
        else:
            assert r.json()["error"] == "too_many_queries" and r.headers["retry-after"] == "1"
    assert [r.status_code for r in steady_answers] == [200, 200, 200]
    assert server.state.teola.quotas.running == {}
