"""How many batches an engine instance runs at once: the runtime option, else the adapter's profile
(remote services: many), else the kind's default (an LLM: as many as requests it runs at once); and
an LLM instance takes no batch while it already runs max_batch requests."""

from types import SimpleNamespace

from engines.protocol import EngineProfile, profile_with
from engines.search.remote_search import RemoteSearchEngine
from engines.sim.sim_engine import sim_engines
from engines.tools.tool_engine import ToolEngine
from teola import App
from teola.balancers.least_loaded import LeastLoaded
from tests.unit.runtime.test_runtime import make_rag


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
    llm_batch = sim_engines()["llm"].profile.max_batch
    assert await inflight(rag(vectordb_inflight=8)) == {
        "llm": llm_batch,
        "embedding": 1,
        "vectordb": 8,
        "reranker": 1,
    }
    assert (await inflight(rag({"max_inflight": {"vectordb": 2}}, vectordb_inflight=8)))["vectordb"] == 2
    assert set((await inflight(rag({"max_inflight": 3}, vectordb_inflight=8))).values()) == {3}


def test_remote_services_run_many_batches_at_once():
    for kind in (RemoteSearchEngine, ToolEngine):
        assert kind.default_profile.max_inflight == 64
        assert profile_with(kind.default_profile, max_batch=4).max_inflight == 64
    assert EngineProfile().max_inflight == 0  # the kind's default


def test_an_llm_instance_running_max_batch_requests_takes_no_more():
    def inst(outstanding, tokens=0):
        return SimpleNamespace(
            inflight=2,
            max_inflight=16,
            healthy=True,
            outstanding=outstanding,
            tokens=tokens,
            profile=EngineProfile(max_batch=8),
        )

    llm, other = LeastLoaded(by_tokens=True, token_budget=1000), LeastLoaded()
    assert llm.free(inst(7)) and not llm.free(inst(8))
    assert not llm.free(inst(1, tokens=1000))  # nor while its KV cache (token budget) is full
    assert other.free(inst(8))  # other engines: only their batches in flight count
    assert llm.pick([inst(8), inst(3, tokens=5)]).outstanding == 3
