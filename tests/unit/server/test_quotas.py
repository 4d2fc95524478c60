"""Per-tenant limits over HTTP on sim engines (teola.server.quotas): concurrent queries and LLM
tokens per minute answer 429 with Retry-After in the JSON error shape, for one tenant only; a slot
comes back whatever way its query ends; the engines see each query's tenant."""

from __future__ import annotations

import asyncio

import pytest

from teola.server import ServerSettings
from teola.server.errors import ApiError
from teola.server.quotas import TenantQuotas, call_tokens, parse_shares, trace_tokens
from tests.support.http import metric
from tests.support.waiting import until
from tests.unit.server.test_server import HANG, make_echo_app, serve

A, B = {"Authorization": "Bearer key-a"}, {"Authorization": "Bearer key-b"}
KEYS = "alpha:key-a;beta:key-b"


def ask(question: str, **config) -> dict:
    return {"query": {"question": question}, "config": config}


async def test_a_tenant_over_its_concurrent_queries_gets_429_and_the_other_tenant_does_not():
    app, llm = make_echo_app()
    settings = ServerSettings(api_keys=KEYS, tenant_max_queries=2, documents="memory", query_timeout=30)
    async with serve({"echo": app}, settings) as c:
        hung = [
            asyncio.ensure_future(c.post("/v1/apps/echo/query", json=ask(f"{HANG} {i}"), headers=A))
            for i in range(2)
        ]
        await until(lambda: c.asgi.state.teola.quotas.running.get("alpha") == 2 and llm.hung >= 1)
        third = await c.post("/v1/apps/echo/query", json=ask("one more"), headers=A)
        assert third.status_code == 429 and third.headers["retry-after"] == "1"
        body = third.json()
        assert (
            body["error"] == "too_many_queries"
            and "tenant_max_queries" in body["detail"]
            and "'alpha'" in body["detail"]
        )
        unread = await c.post("/v1/apps/echo/query", content=b"{not even JSON", headers=A)
        assert unread.status_code == 429  # refused before its body was read: a flood costs no parsing
        other = await c.post("/v1/apps/echo/query", json=ask("beta is not limited by alpha"), headers=B)
        assert other.status_code == 200
        llm.release.set()
        assert [r.status_code for r in await asyncio.gather(*hung)] == [
            200,
            200,
        ]  # accepted queries all answer
        assert (await c.post("/v1/apps/echo/query", json=ask("again"), headers=A)).status_code == 200
        state = c.asgi.state.teola
        assert state.quotas.running == {}
        metrics = (await c.get("/metrics", headers=A)).text
        assert metric(metrics, 'teola_server_queries_failed_total{app="echo",reason="limited"}') == 2


async def test_slots_come_back_after_errors_streams_and_disconnects():
    app, llm = make_echo_app()
    settings = ServerSettings(tenant_max_queries=1, documents="memory", query_timeout=30)
    async with serve({"echo": app}, settings) as c:
        quotas = c.asgi.state.teola.quotas
        bad = await c.post(
            "/v1/apps/echo/query", json={"query": {"question": "x"}, "config": {"nodes": {"nope": {}}}}
        )
        assert bad.status_code == 422 and quotas.running == {}
        streamed = await c.post("/v1/apps/echo/query", json={**ask("stream me"), "stream": True})
        assert streamed.status_code == 200 and "event: done" in streamed.text and quotas.running == {}
        task = asyncio.ensure_future(c.post("/v1/apps/echo/query", json=ask(f"{HANG} then cancel")))
        await until(lambda: llm.hung >= 1)
        assert quotas.running == {"default": 1}
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await until(lambda: quotas.running == {})
        llm.release.set()
        assert (await c.post("/v1/apps/echo/query", json=ask("after"))).status_code == 200


async def test_tokens_per_minute_are_charged_from_what_the_engines_report():
    app, _ = make_echo_app()
    settings = ServerSettings(api_keys=KEYS, tenant_tokens_per_minute=5, documents="memory", query_timeout=30)
    async with serve({"echo": app}, settings) as c:
        first = await c.post("/v1/apps/echo/query", json=ask("a question of some tokens"), headers=A)
        assert first.status_code == 200
        assert trace_tokens(first.json()["trace"]) > 5  # this one query took alpha past its minute
        second = await c.post("/v1/apps/echo/query", json=ask("and another"), headers=A)
        assert second.status_code == 429 and second.json()["error"] == "token_rate_exceeded"
        assert 1 <= int(second.headers["retry-after"]) <= 60
        assert (
            await c.post("/v1/apps/echo/query", json=ask("beta has its own minute"), headers=B)
        ).status_code == 200
        door = await c.post(
            "/v1/chat/completions",
            headers=A,
            json={"model": "echo", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
        )
        assert door.status_code == 429  # the OpenAI door shares the tenant's limits


async def test_the_engines_see_each_querys_tenant():
    app, llm = make_echo_app()
    seen: list[str] = []
    settings = ServerSettings(api_keys=KEYS, documents="memory", tenant_shares="alpha:3")
    async with serve({"echo": app}, settings) as c:
        sched = app.runtime.schedulers["llm"]
        real = sched.submit
        sched.submit = lambda entry: (seen.append(entry.tenant), real(entry))[1]
        await c.post("/v1/apps/echo/query", json=ask("who"), headers=A)
        await c.post("/v1/apps/echo/query", json=ask("who"), headers=B)
        assert sched.shares.weights == {"alpha": 3.0}
    assert seen == ["alpha", "beta"]


def test_quota_helpers():
    q = TenantQuotas(max_queries=1)
    slot = q.admit("t")
    with pytest.raises(ApiError) as err:
        q.admit("t")
    assert err.value.status == 429
    slot.release()
    slot.release()  # idempotent: every path that may end a request releases
    assert q.running == {} and q.admit("t").tenant == "t"
    assert trace_tokens([None, {"num_prompt_tokens": 3, "num_output_tokens": 2}, {"op": "searching"}]) == 5
    assert call_tokens({"num_prompt_tokens": 1, "num_output_tokens": None}) == 1 and call_tokens("x") == 0
    assert parse_shares(" gold:3, free:1 ,") == {"gold": 3.0, "free": 1.0}
    for bad in ("gold", "gold:0", "gold:x", ":2", "gold:inf"):
        with pytest.raises(ValueError, match="tenant_shares"):
            parse_shares(bad)
    with pytest.raises(ValueError, match="tenant_max_queries"):
        ServerSettings(tenant_max_queries=-1)
