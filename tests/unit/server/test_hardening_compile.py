"""Compilation runs in the server's own bounded pool of threads (teola.server.compiling): a query
that gets its 504 while compiling keeps its tenant's slot until the compile thread really ends, the
loop's default executor (tools, the document store) is never used, and a full pool refuses more
work with 503 instead of queueing it without bound."""

from __future__ import annotations

import asyncio
import threading

from teola.server import ServerSettings
from tests.support.waiting import until
from tests.unit.server.test_server import make_echo_app, serve


def ask(question: str, **config) -> dict:
    return {"query": {"question": question}, "config": config}


def gate_compile(app) -> tuple[threading.Event, list[str]]:
    """Make `app.compile` wait for the returned event; the list collects the compiling threads' names."""
    gate, threads = threading.Event(), []
    real = app.compile

    def slow_compile(query, config=None):
        threads.append(threading.current_thread().name)
        gate.wait(10)
        return real(query, config)

    app.compile = slow_compile
    return gate, threads


async def test_a_query_timed_out_while_compiling_holds_its_slot_until_the_thread_ends():
    app, _ = make_echo_app()
    gate, threads = gate_compile(app)
    settings = ServerSettings(tenant_max_queries=1, documents="memory", query_timeout=30)
    async with serve({"echo": app}, settings) as c:
        quotas = c.asgi.state.teola.quotas
        try:
            late = await c.post("/v1/apps/echo/query", json=ask("slow", timeout=0.05))
            assert late.status_code == 504 and "compiling" in late.json()["detail"]
            assert quotas.running == {"default": 1}, "the compile thread still runs: the slot is still taken"
            again = await c.post("/v1/apps/echo/query", json=ask("again"))
            assert again.status_code == 429 and again.json()["error"] == "too_many_queries"
        finally:
            gate.set()
        await until(lambda: quotas.running == {})
        assert threads and all(name.startswith("teola-compile") for name in threads), threads
        assert (await c.post("/v1/apps/echo/query", json=ask("after"))).status_code == 200


async def test_a_full_compile_pool_refuses_with_503_and_a_withdrawn_compile_never_runs():
    app, _ = make_echo_app()
    gate, threads = gate_compile(app)
    settings = ServerSettings(compile_threads=1, compile_queue=1, documents="memory", query_timeout=30)
    async with serve({"echo": app}, settings) as c:
        pool = c.asgi.state.teola.compiler
        try:
            running = asyncio.ensure_future(c.post("/v1/apps/echo/query", json=ask("one")))
            await until(lambda: len(threads) == 1)
            waiting = asyncio.ensure_future(c.post("/v1/apps/echo/query", json=ask("two", timeout=0.2)))
            await until(lambda: pool.pending == 2)
            full = await c.post("/v1/apps/echo/query", json=ask("three"))
            assert full.status_code == 503 and full.json()["error"] == "compile_busy"
            assert "compile_threads" in full.json()["detail"] and full.headers["retry-after"] == "1"
            assert (await waiting).status_code == 504
            await until(lambda: pool.pending == 1)  # the waiting compilation was withdrawn, not left queued
        finally:
            gate.set()
        assert (await running).status_code == 200
        assert len(threads) == 1, "the compilation withdrawn while waiting never ran"
        await until(lambda: pool.pending == 0)


async def test_a_tenant_flooding_the_compile_threads_leaves_one_for_the_others():
    app, _ = make_echo_app()
    gate, threads = threading.Event(), []
    real = app.compile

    def compile_slowly_for_alpha(query, config=None):
        if query["question"].startswith("alpha"):
            threads.append(threading.current_thread().name)
            gate.wait(10)
        return real(query, config)

    app.compile = compile_slowly_for_alpha
    settings = ServerSettings(api_keys="alpha:key-a;beta:key-b", documents="memory", query_timeout=30)
    async with serve({"echo": app}, settings) as c:
        try:
            flood = [
                asyncio.ensure_future(
                    c.post(
                        "/v1/apps/echo/query",
                        json=ask(f"alpha {i}"),
                        headers={"Authorization": "Bearer key-a"},
                    )
                )
                for i in range(8)
            ]
            await until(lambda: len(threads) >= 1)
            beta = await c.post(
                "/v1/apps/echo/query", json=ask("beta", timeout=2), headers={"Authorization": "Bearer key-b"}
            )
            assert beta.status_code == 200, beta.text
        finally:
            gate.set()
        assert [r.status_code for r in await asyncio.gather(*flood)] == [200] * 8
