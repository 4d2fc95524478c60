"""The simulated engine admits a call resuming on KV its paused call preserved ahead of the FCFS
head (engines.sim.admission.SimAdmission._head): INFERCEPT's preserve resumes the request as its API
returns instead of queueing it behind requests that cannot get memory."""

from __future__ import annotations

from types import SimpleNamespace

from engines.sim.admission import SimAdmission


def seq(key: str, swapped: int = 0) -> SimpleNamespace:
    return SimpleNamespace(req={"kv_key": key}, swapped=swapped)


def test_a_preserved_resume_goes_ahead_of_the_fcfs_head():
    new, swapped_back, resumed = seq("a"), seq("b"), seq("c")
    engine = SimpleNamespace(
        waiting=[new, swapped_back, resumed],
        paused={"b": SimpleNamespace(held=None), "c": SimpleNamespace(held=object())},
    )
    assert SimAdmission._head(engine) is resumed  # c kept its blocks: it resumes first
    engine.paused.pop("c")
    assert SimAdmission._head(engine) is new  # b's KV is on the host: plain FCFS
    engine.waiting = [new]
    assert SimAdmission._head(engine) is new
