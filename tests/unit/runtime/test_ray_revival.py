"""How the Ray executor brings back an instance whose actor died, without a cluster: actor handles
are stood in for. An actor Ray will not restart is replaced by a new one (once, however many
callers wait), and one that no live node can hold is reported after `restart_timeout` instead of
holding the instance's batches forever. On a real cluster: tests/ray/test_ray_cluster.py."""

import asyncio

import pytest
import ray

from teola import Engine
from teola.runtime import EngineDown
from teola.runtime.executors import ray as ray_executor
from teola.runtime.executors.ray import RayExecutor

SIM = "engines.sim.sim_engine:SimEngine"


async def answer(value):
    return value


async def raise_(exc):
    raise exc


async def never():
    await asyncio.Event().wait()


class Method:
    """`handle.method.remote(...)` (and `actor_class.options(...).remote(...)`) -> fn(...)."""

    def __init__(self, fn):
        self.remote = fn


class FakeActor:
    """An actor handle: `where` answers as `where` says; the rest as a live actor on `node`."""

    def __init__(self, node: str, where=lambda: answer({})):
        info = {"pid": 1, "node_id": node, "profile": None, "methods": ["health"]}
        self.node = node
        self.where = Method(where)
        self.acquire = Method(lambda secrets=None: answer(info))
        self.restart = Method(lambda: answer(None))
        self.call = Method(lambda method, *args: answer(True))


@pytest.fixture
def executor(monkeypatch):
    """A RayExecutor whose first actor is on node-1 and whose later ones are on node-2, ...;
    `executor.created` lists them, `executor.killed` the ones it killed."""
    ex = RayExecutor()
    ex.created, ex.killed = [], []

    def create(*args):
        ex.created.append(FakeActor(f"node-{len(ex.created) + 1}"))
        return ex.created[-1]

    actor_class = type("ActorClass", (), {"options": lambda self, **opts: Method(create)})()
    monkeypatch.setattr(ray, "remote", lambda cls: actor_class)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "kill", lambda handle, no_restart: ex.killed.append(handle))
    return ex


async def crash(ex: RayExecutor, inst, error: Exception) -> None:
    """The instance's actor dies under a call: the call fails with EngineDown."""
    inst.handle.call = Method(lambda method, *args: raise_(error))
    with pytest.raises(EngineDown):
        await ex.call(inst, "health")


async def test_an_actor_ray_will_not_restart_is_replaced_once_on_a_live_node(executor):
    inst = await executor.launch(Engine("reranker", kind=SIM, ops=["reranking"]), 0, None)
    dead = inst.handle
    await crash(executor, inst, ray.exceptions.ActorDiedError())
    dead.where = Method(lambda: raise_(ray.exceptions.ActorDiedError()))  # its restarts are used up
    await asyncio.wait_for(asyncio.gather(executor.restart(inst), executor.call(inst, "health")), 10)
    assert len(executor.created) == 2 and executor.killed == [dead]  # one replacement for both callers
    assert inst.handle is executor.created[1] and executor.placements["reranker/0"]["node_id"] == "node-2"
    assert await executor.call(inst, "health") is True


async def test_an_actor_no_node_can_hold_is_reported_not_waited_for_forever(executor, monkeypatch):
    monkeypatch.setattr(ray_executor, "PING_TIMEOUT", 0.05)
    executor.restart_timeout = 0.3
    inst = await executor.launch(
        Engine("llm", kind=SIM, ops=["decoding"], resources={"resources": {"gpu_box": 1}}), 0, None
    )
    await crash(executor, inst, ray.exceptions.ActorUnavailableError("node died", None))
    inst.handle.where = Method(lambda: never())  # Ray restarts it once a node with gpu_box joins
    with pytest.raises(RuntimeError, match=r"did not come back within 0 s .*gpu_box"):
        await asyncio.wait_for(executor.restart(inst), 10)
    inst.handle.where = Method(lambda: answer({}))  # such a node joined
    await asyncio.wait_for(executor.restart(inst), 10)
    assert executor.placements["llm/0"]["node_id"] == "node-1" and len(executor.created) == 1
