"""The Ray executor on a real local Ray cluster, with deterministic engines loaded by import path
inside the actors (the same code path as real engines)."""

import asyncio
import os

import pytest
import ray

from apps.advanced_rag import set_template
from teola import App, Engine
from teola.runtime import QueryUnavailable, RayExecutor
from tests.support.waiting import until

SIM = "engines.sim.sim_engine:SimEngine"
DOC = " ".join(f"paris is the capital of france fact{i} river seine museum louvre" for i in range(30))
QUERY = {"question": "what is the capital of france", "documents": [DOC]}


def make_rag(runtime: dict, llm_latency: float = 0.0, placement: dict | None = None) -> App:
    placement = placement or {}
    app = App("rag", config={"runtime": runtime})
    lat = {"latency": {1: llm_latency}} if llm_latency else {}
    app.register_engine(
        Engine(
            "llm",
            kind=SIM,
            ops=["prefilling", "partial_prefilling", "full_prefilling", "decoding", "partial_decoding"],
            resources=placement.get("llm"),
            **lat,
        )
    )
    app.register_engine(
        Engine(
            "embedding",
            kind=SIM,
            ops=["embedding"],
            max_efficient_batch=4,
            resources=placement.get("embedding"),
        )
    )
    app.register_engine(
        Engine("vectordb", kind=SIM, ops=["ingestion", "searching"], resources=placement.get("vectordb"))
    )
    app.register_engine(Engine("reranker", kind=SIM, ops=["reranking"], resources=placement.get("reranker")))
    set_template(app, chunk_size=64, chunk_overlap=8, top_k=4, max_tokens=32)
    return app


async def test_ray_and_local_executors_give_the_same_answers(local_ray):
    local = make_rag({})
    remote = make_rag({"executor": "ray"})
    try:
        a = await local.run(QUERY)
        b = await remote.run(QUERY)
        assert a.output == b.output and a.output.startswith("answer ")
        assert sorted(t["primitive"] for t in a.trace) == sorted(t["primitive"] for t in b.trace)
        # the instances really are actors in other processes
        executor = remote.runtime.executor
        assert isinstance(executor, RayExecutor)
        pids = {p["pid"] for p in executor.placements.values()}
        assert os.getpid() not in pids and len(pids) == 4
    finally:
        await local.stop()
        await remote.stop()


async def test_killed_engine_actor_fails_only_its_queries_and_recovers(local_ray):
    app = make_rag({"executor": "ray"}, llm_latency=0.3)
    try:
        await app.run(QUERY)  # engines up
        llm = app.runtime.instances["llm"][0]
        before = await app.runtime.executor.where(llm)
        runs = [asyncio.create_task(app.run(QUERY)) for _ in range(4)]
        # a streaming batch of these queries has sent items from inside the LLM actor: a crash now
        # fails its queries (a batch that has sent nothing yet is retried per query instead)
        await until(lambda: app.runtime.executor.call(llm, "streaming"), timeout=30)
        ray.kill(llm.handle, no_restart=False)  # crash the LLM actor mid-load; Ray restarts it
        results = await asyncio.wait_for(asyncio.gather(*runs, return_exceptions=True), 60)
        failed = [r for r in results if isinstance(r, Exception)]
        assert failed, "killing the LLM actor mid-load should fail the queries running on it"
        for e in failed:
            assert "llm/0" in str(e) or getattr(e, "engine", None) == "llm", str(e)
            assert isinstance(e, QueryUnavailable), repr(e)  # 503 over HTTP
        # the supervisor saw the actor die: down (while Ray restarts it), then back, counted
        await until(lambda: app.runtime.health()["llm"]["healthy"], timeout=60)
        assert app.runtime.health()["llm"]["restarts"] == 1 and app.runtime.metrics.engine_failures == 1
        after = None
        for _ in range(3):  # the restarted actor answers the next queries
            r = await asyncio.wait_for(app.run(QUERY), 60)
            assert r.output.startswith("answer ")
        after = await app.runtime.executor.where(llm)
        assert after["pid"] != before["pid"]
    finally:
        await app.stop()


async def test_apps_declaring_the_same_engines_share_their_actors_until_the_last_stops(local_ray):
    from teola.runtime.executors.ray import shared_actor_name

    first, second = make_rag({"executor": "ray"}), make_rag({"executor": "ray"})
    try:
        a = await first.run(QUERY)
        b = await second.run(QUERY)
        assert a.output == b.output
        placements = [app.runtime.executor.placements for app in (first, second)]
        assert placements[0] == placements[1] and len({p["pid"] for p in placements[0].values()}) == 4
        await first.stop()  # the second still holds every actor
        assert (await second.run(QUERY)).output == a.output
    finally:
        await first.stop()
        await second.stop()
    name = shared_actor_name(second.engines["llm"], 0)
    with pytest.raises(ValueError):
        ray.get_actor(name)  # the last holder killed it
    unshared = make_rag({"executor": "ray", "ray": {"share_actors": False}})
    try:
        c = await unshared.run(QUERY)
        assert c.output == a.output
        assert {p["pid"] for p in unshared.runtime.executor.placements.values()}.isdisjoint(
            p["pid"] for p in placements[0].values()
        )
    finally:
        await unshared.stop()
