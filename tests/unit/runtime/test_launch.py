"""teola.runtime.launch: engines launched at once only where the executor runs each in its own
process, one engine's instances in turn, and after a failure exactly the started instances listed."""

import asyncio

import pytest

from engines.protocol import EngineProfile
from teola.ir.engine_spec import Engine
from teola.runtime.executors.executor import Instance
from teola.runtime.launch import launch_instances


class Recorder:
    """An executor whose launches take one event-loop turn each way and record their order."""

    def __init__(self, parallel: bool, fail: str | None = None) -> None:
        self.parallel_launch = parallel
        self.fail = fail
        self.events: list[str] = []

    async def launch(self, spec: Engine, index: int, backend) -> Instance:
        name = f"{spec.name}/{index}"
        self.events.append(f"begin {name}")
        await asyncio.sleep(0.01 if spec.name != "slow" else 0.05)
        if spec.name == self.fail:
            raise RuntimeError(f"{name} failed to start")
        self.events.append(f"end {name}")
        return Instance(engine=spec.name, index=index, handle=backend, profile=EngineProfile())


SPECS = {
    "slow": Engine("slow", kind="vllm", instances=2),
    "fast": Engine("fast", kind="sentence_transformers"),
}


async def test_in_turn_when_the_executor_shares_the_process():
    ex, into = Recorder(parallel=False), {}
    await launch_instances(ex, SPECS, {}, None, into)
    assert ex.events == [
        "begin slow/0",
        "end slow/0",
        "begin slow/1",
        "end slow/1",
        "begin fast/0",
        "end fast/0",
    ]
    assert list(into) == ["slow", "fast"] and [i.name for i in into["slow"]] == ["slow/0", "slow/1"]


async def test_engines_at_once_their_instances_in_turn_when_each_has_its_own_process():
    ex, into = Recorder(parallel=True), {}
    await launch_instances(ex, SPECS, {}, None, into)
    # fast/0 begins before slow/0 ends (at once), slow/1 only after slow/0 (in turn)
    assert ex.events.index("begin fast/0") < ex.events.index("end slow/0")
    assert ex.events.index("end slow/0") < ex.events.index("begin slow/1")
    assert list(into) == ["slow", "fast"], "the specs' order, whatever finished first"
    assert [i.name for i in into["slow"]] == ["slow/0", "slow/1"] and [i.name for i in into["fast"]] == [
        "fast/0"
    ]


async def test_a_failed_engine_raises_after_the_others_and_the_started_ones_are_listed():
    ex, into = Recorder(parallel=True, fail="slow"), {}
    with pytest.raises(RuntimeError, match="slow/0 failed to start"):
        await launch_instances(ex, SPECS, {}, None, into)
    assert [i.name for i in into["fast"]] == ["fast/0"], "started, so the caller can stop it"
    assert into["slow"] == [] and "begin slow/1" not in ex.events


async def test_a_wrong_number_of_backends_is_refused_before_anything_starts():
    ex = Recorder(parallel=True)
    with pytest.raises(ValueError, match="engine 'slow': 1 backends given for 2 instances"):
        await launch_instances(ex, SPECS, {"slow": [object()]}, None, {})
    assert ex.events == []
