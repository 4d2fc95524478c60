"""Engine capabilities are declared (or read from the adapter's methods) once, when the executor
starts an instance; the runtime checks `Instance.capabilities`, never the adapter."""

import asyncio

import pytest

from engines.protocol import Capability, EngineProfile, capabilities_of
from teola.ir.engine_spec import Engine
from teola.runtime.executors.local import LocalExecutor


class Adapter:
    name = "a"
    ops = frozenset({"embedding"})
    profile = EngineProfile()

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def execute(self, op, requests):
        return [None] * len(requests)

    async def health(self) -> bool:
        return True

    async def abort(self, owners) -> int:
        return 0


def test_without_a_declaration_the_methods_say():
    assert capabilities_of(Adapter()) == {Capability.HEALTH, Capability.ABORT}


def test_a_declaration_wins_over_the_methods():
    adapter = Adapter()
    adapter.capabilities = [Capability.HEALTH]
    assert capabilities_of(adapter) == {Capability.HEALTH}


def test_declaring_a_capability_without_its_method_is_refused_naming_it():
    adapter = Adapter()
    adapter.capabilities = ["health", "cancel"]
    with pytest.raises(TypeError, match="cancel"):
        capabilities_of(adapter)
    adapter.capabilities = ["rewind"]
    with pytest.raises(TypeError, match="Capability"):
        capabilities_of(adapter)


def test_the_local_executor_reads_them_once_at_launch():
    async def main():
        adapter = Adapter()
        inst = await LocalExecutor().launch(Engine("e", kind="sentence_transformers"), 0, adapter)
        adapter.cancel = lambda *a: 0  # added after launch: not a capability of the instance
        return inst

    inst = asyncio.run(main())
    assert inst.capabilities == {Capability.HEALTH, Capability.ABORT}
    with pytest.raises(TypeError, match="cannot stream"):
        LocalExecutor().stream(inst, "embedding", [{}])
