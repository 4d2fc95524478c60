"""A client's ``config.priority`` stays within 0..MAX_PRIORITY (teola.server.schemas): it may lower
its own query's priority at the engine, never run ahead of the default and so of other tenants'
fair shares; a priority in range reaches the LLM engine's requests through the scheduler."""

from __future__ import annotations

import pytest

from engines.sim.sim_engine import SimEngine
from teola import App, Engine, Node
from teola.server import ServerSettings
from tests.support.borrowed import Borrowed
from tests.unit.server.test_server import serve

MAX_PRIORITY = 1000  # teola.server.schemas.MAX_PRIORITY, as documented in docs/configuration.md


def topology_app() -> tuple[App, Borrowed]:
    """One LLM node under the topology policy, which leaves a request's own priority to the engine."""
    app = App("agent", config={"runtime": {"policy": "topology"}})
    llm = Borrowed(SimEngine("llm"))
    app.register_engine(Engine("llm", kind="vllm"), backend=llm)
    app.update_template(
        [
            Node(
                "llm",
                name="answer",
                engine="llm",
                config={"parts": [["question", "$query.question"]], "max_tokens": 8},
            )
        ]
    )
    return app, llm


def ask(**config) -> dict:
    return {"query": {"question": "which fruit?"}, "config": config}


@pytest.mark.parametrize("priority", [-1, -1_000_000, MAX_PRIORITY + 1])
async def test_a_priority_outside_the_clients_range_is_a_422_naming_it(priority):
    app, llm = topology_app()
    await llm.engine.start()
    async with serve({"agent": app}, ServerSettings(documents="memory")) as c:
        r = await c.post("/v1/apps/agent/query", json=ask(priority=priority))
        assert r.status_code == 422, r.text
        assert "config.priority" in r.json()["detail"]
        assert not llm.requests, "nothing reached the engine"


async def test_a_priority_in_range_reaches_the_engine_requests():
    app, llm = topology_app()
    await llm.engine.start()
    async with serve({"agent": app}, ServerSettings(documents="memory")) as c:
        for priority in (0, 7, MAX_PRIORITY):
            r = await c.post("/v1/apps/agent/query", json=ask(priority=priority))
            assert r.status_code == 200, r.text
            assert {req["priority"] for req in llm.requests} == {priority}
            llm.requests.clear()
