"""Core lending between engines that share a CPU (engines/machine/core_lending.py,
engines/machine/core_share.py)."""

import asyncio

import pytest

from engines.machine.core_lending import lent_cores
from engines.machine.core_share import CoreShare

HOMES = {"vllm": [1], "st": [0]}


def test_an_engine_alone_with_work_borrows_every_core_and_shares_them_under_load():
    assert lent_cores("vllm", {"vllm"}, HOMES, [0, 1]) == [0, 1]
    assert lent_cores("vllm", set(), HOMES, [0, 1]) == [0, 1]  # idle: ready to start on all
    assert lent_cores("vllm", {"vllm", "st"}, HOMES, [0, 1]) == [1]
    assert lent_cores("st", {"vllm", "st"}, HOMES, [0, 1]) == [0]
    assert lent_cores("st", {"st"}, HOMES, [0, 1]) == [0, 1]


def test_an_engine_alone_in_its_process_keeps_its_home():
    """Under the Ray executor each engine is alone in its actor and cannot see the others."""
    assert lent_cores("vllm", {"vllm"}, {"vllm": [1]}, [0, 1]) == [1]
    with pytest.raises(KeyError, match="'reranker' does not share cores"):
        lent_cores("reranker", set(), HOMES, [0, 1])


class Mover:
    """A group that moves while it runs (as vLLM does between two steps), after `delay` seconds."""

    def __init__(self, delay: float = 0.0):
        self.delay = delay
        self.moves: list[list[int]] = []

    async def __call__(self, cores: list[int]) -> None:
        await asyncio.sleep(self.delay)
        self.moves.append(cores)


async def test_vllm_is_lent_the_cores_while_the_models_idle_and_gives_them_back_before_they_compute():
    share, llm = CoreShare([0, 1]), Mover(delay=0.05)
    share.join("vllm", [1], llm)
    share.join("st", [0])
    await asyncio.sleep(0.1)
    assert llm.moves == [[0, 1]]  # nobody else has work: vLLM may use both cores
    assert await share.enter("vllm") == [0, 1]
    t = asyncio.get_running_loop().time()
    assert await share.enter("st") == [0]  # vLLM busy: the models get their home core...
    assert llm.moves == [[0, 1], [1]]  # ...once vLLM went back to its own
    assert asyncio.get_running_loop().time() - t >= 0.04
    share.leave("vllm")
    assert share.cores("st") == [0, 1]  # vLLM done: the models' next batch uses both cores
    share.leave("st")
    await asyncio.sleep(0.1)
    assert llm.moves[-1] == [0, 1] and share.cores("vllm") == [0, 1]


async def test_an_engine_starts_anyway_when_the_other_does_not_answer_in_time(monkeypatch):
    monkeypatch.setattr("engines.machine.core_share.SHRINK_WAIT", 0.05)
    share, llm = CoreShare([0, 1]), Mover(delay=0.01)
    share.join("vllm", [1], llm)
    share.join("st", [0])
    await asyncio.sleep(0.05)
    llm.delay = 5.0
    t = asyncio.get_running_loop().time()
    assert await share.enter("st") == [0, 1]  # vLLM idle: st may use both cores, no wait
    share.leave("st")
    await share.enter("vllm")
    assert await share.enter("st") == [0]
    assert asyncio.get_running_loop().time() - t < 1.0


async def test_a_group_of_several_engines_is_busy_while_any_of_them_is_and_leaves_with_the_last():
    share, llm = CoreShare([0, 1]), Mover()
    share.join("vllm", [1], llm)
    share.join("st", [0])
    share.join("st", [0])  # embedder and reranker: one group
    await share.enter("st")
    await share.enter("st")
    share.leave("st")
    assert share.cores("vllm") == [1]
    share.leave("st")
    assert share.cores("vllm") == [0, 1]
    share.leave_share("st")
    assert "st" in share.groups
    share.leave_share("st")
    assert "st" not in share.groups and share.cores("vllm") == [1]  # alone again: its home


async def test_a_failed_move_keeps_the_cores_the_group_had(caplog):
    async def down(cores):
        raise RuntimeError("engine core died")

    share = CoreShare([0, 1])
    share.join("vllm", [1], down)
    share.join("st", [0])
    await asyncio.sleep(0.05)
    assert share.groups["vllm"].current == [1]
    assert "could not move vllm to cores [0, 1]: engine core died" in caplog.text
