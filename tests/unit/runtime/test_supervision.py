"""Engine supervision on deterministic sim engines: an instance that dies mid-query fails its
in-flight queries with QueryUnavailable (503 over HTTP), /readyz names it while it restarts, it is
restarted in place with backoff, and later queries succeed without restarting anything else."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from engines.sim.sim_engine import SimEngine, sim_engines
from teola.runtime import QueryUnavailable
from teola.server import ServerSettings, create_server
from tests.support.waiting import until
from tests.unit.runtime.test_runtime import QUERY, make_rag


class MortalEngine(SimEngine):
    """A sim LLM that can die: batches fail and health answers False until it is started again.
    Starting takes `boot` seconds; the first `failed_boots` starts fail (a restart that must retry)."""

    def __init__(self, name: str, boot: float = 0.2, failed_boots: int = 0, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.dead = False
        self.boot = boot
        self.failed_boots = failed_boots
        self.starts = 0

    def kill(self) -> None:
        self.dead = True
        self.started = False

    async def start(self) -> None:
        self.starts += 1
        await asyncio.sleep(self.boot if self.starts > 1 else 0)
        if self.starts > 1 and self.failed_boots > 0:
            self.failed_boots -= 1
            raise RuntimeError("boot failed")
        self.dead = False
        await super().start()

    async def health(self) -> bool:
        return not self.dead and self.started

    async def _execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        out = await super()._execute(op, requests)
        if self.dead:
            raise RuntimeError("EngineDeadError: engine core process died")
        return out


def mortal_rag(interval: float | None = 0.05, **kw: Any):
    sims = sim_engines()
    sims["llm"] = MortalEngine("llm", latency={1: 0.2}, serial=False, **kw)
    app = make_rag(sims, runtime={"health_interval": interval, "restart_backoff": (0.05, 0.2)})
    return app, sims["llm"]


async def test_a_dead_instance_fails_its_in_flight_queries_then_comes_back():
    app, llm = mortal_rag(interval=None)  # only the failure itself triggers the probe
    try:
        await app.start()
        task = asyncio.ensure_future(app.run(QUERY))
        await until(lambda: llm.busy() > 0)
        llm.kill()
        with pytest.raises(QueryUnavailable, match="restarting"):
            await task
        health = app.runtime.health()["llm"]
        assert not health["healthy"] and list(health["down"]) == ["llm/0"]
        await until(lambda: app.runtime.health()["llm"]["healthy"], timeout=5)
        assert (await app.run(QUERY)).output.startswith("answer ")
        assert llm.starts == 2 and app.runtime.metrics.engine_restarts == 1
        assert app.runtime.health()["llm"]["restarts"] == 1
    finally:
        await app.stop()


async def test_the_periodic_probe_finds_an_idle_dead_instance_and_restarts_retry_with_backoff():
    app, llm = mortal_rag(interval=0.05, failed_boots=2)
    try:
        await app.start()
        llm.kill()
        await until(lambda: not app.runtime.health()["llm"]["healthy"], timeout=5)
        await until(lambda: app.runtime.health()["llm"]["healthy"], timeout=10)
        assert llm.starts == 4  # the first start, two failed restarts, one that worked
        assert app.runtime.metrics.engine_failures == 1 and app.runtime.metrics.engine_restarts == 1
        assert (await app.run(QUERY)).output.startswith("answer ")
    finally:
        await app.stop()


async def test_queries_queued_while_an_instance_restarts_wait_for_it_and_succeed():
    app, llm = mortal_rag(interval=0.05, boot=0.5)
    try:
        await app.start()
        llm.kill()
        await until(lambda: not app.runtime.health()["llm"]["healthy"], timeout=5)
        r = await app.run(QUERY)  # arrives while down: waits in the queue, runs after the restart
        assert r.output.startswith("answer ")
    finally:
        await app.stop()


async def test_over_http_in_flight_get_503_readyz_names_the_engine_then_recovers():
    app, llm = mortal_rag(interval=None, boot=0.5)
    server = create_server({"rag": app}, ServerSettings(query_timeout=30))
    async with server.router.lifespan_context(server):
        transport = httpx.ASGITransport(app=server)
        async with httpx.AsyncClient(transport=transport, base_url="http://teola.test", timeout=30) as c:
            pending = asyncio.ensure_future(c.post("/v1/apps/rag/query", json={"query": QUERY}))
            await until(lambda: llm.busy() > 0)
            llm.kill()
            r = await pending
            assert r.status_code == 503 and r.json()["error"] == "engine_unavailable", r.text
            assert r.headers["retry-after"] and "llm/0" in r.json()["detail"]
            ready = await c.get("/readyz")
            assert ready.status_code == 503 and "rag.llm" in ready.json()["detail"]
            assert 'teola_engine_up{app="rag",engine="llm"} 0.0' in (await c.get("/metrics")).text
            await until(lambda: app.runtime.health()["llm"]["healthy"], timeout=10)
            assert (await c.get("/readyz")).status_code == 200
            r = await c.post("/v1/apps/rag/query", json={"query": QUERY})
            assert r.status_code == 200 and r.json()["output"].startswith("answer ")


async def test_one_slow_or_failed_probe_does_not_restart_a_busy_engine():
    app, llm = mortal_rag(interval=0.05)
    answers = iter([False])  # the next probe fails once (a saturated pool, a long batch), then all pass
    real = llm.health
    probes = 0

    async def flaky() -> bool:
        nonlocal probes
        probes += 1
        return next(answers, await real())

    llm.health = flaky
    try:
        await app.start()
        await until(lambda: probes >= 3)  # the failed probe, its recheck and the next round
        assert llm.starts == 1 and app.runtime.metrics.engine_failures == 0
        assert app.runtime.health()["llm"]["healthy"]
    finally:
        await app.stop()


async def test_stopping_ends_the_probe_loop_even_if_a_probe_swallows_the_cancellation():
    app, llm = mortal_rag(interval=0.02)
    probing = asyncio.Event()

    async def stubborn() -> bool:  # what wait_for on Python 3.11 can do when cancel and result race
        probing.set()
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            pass
        return True

    llm.health = stubborn
    await app.start()
    await probing.wait()
    await asyncio.wait_for(app.stop(), 5)  # hangs forever without the supervisor's closed flag
