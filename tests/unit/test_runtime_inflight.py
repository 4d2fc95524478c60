"""How many batches an engine instance runs at once: the runtime option, else the adapter's profile
(remote services: many), else the kind's default."""
from engines.protocol import EngineProfile, profile_with
from engines.remote_search import RemoteSearchEngine
from engines.sim_engine import sim_engines
from engines.tools import ToolEngine
from teola import App
from tests.unit.test_runtime import make_rag


def rag(runtime: dict | None = None, vectordb_inflight: int = 0) -> App:
    sims = sim_engines()
    if vectordb_inflight:
        sims["vectordb"].profile = EngineProfile(max_inflight=vectordb_inflight)
    return make_rag(sims, runtime=runtime)


async def inflight(app: App) -> dict[str, int]:
    await app.start()
    try:
        return {name: insts[0].max_inflight for name, insts in app.runtime.instances.items()}
    finally:
        await app.stop()


async def test_adapter_profile_sets_the_default_and_the_runtime_option_wins():
    assert await inflight(rag(vectordb_inflight=8)) == {"llm": 4, "embedding": 1, "vectordb": 8, "reranker": 1}
    assert (await inflight(rag({"max_inflight": {"vectordb": 2}}, vectordb_inflight=8)))["vectordb"] == 2
    assert set((await inflight(rag({"max_inflight": 3}, vectordb_inflight=8))).values()) == {3}


def test_remote_services_run_many_batches_at_once():
    for kind in (RemoteSearchEngine, ToolEngine):
        assert kind.default_profile.max_inflight == 64
        assert profile_with(kind.default_profile, max_batch=4).max_inflight == 64
    assert EngineProfile().max_inflight == 0  # the kind's default
