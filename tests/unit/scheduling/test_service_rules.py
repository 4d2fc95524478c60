"""Issue 73's service rules against hand-computed cases: executor time charged as service (the
simulated engine's "executor_s"; queued time counted as waiting), quanta fitted to the observed
call service, and ATLAS's per-program scalar (Algorithm 1 line 11) against eq. 2 over parents."""

from __future__ import annotations

import asyncio

import pytest

from engines.protocol import Capability, capabilities_of
from engines.sim.llm import SimLLM
from teola.api.program import Program
from teola.ir.engine_spec import Engine
from teola.runtime import Runtime
from teola.scheduling.base import Limits, Pending
from teola.scheduling.process_table import ProcessTable
from teola.scheduling.program.atlas import ATLASPolicy
from teola.scheduling.program.plas import PLASPolicy
from teola.scheduling.program.quanta import ObservedQuanta, percentile
from teola.scheduling.program.queues import ProgramQueues
from teola.sim.virtual_loop import run_virtual

LIMITS = Limits(max_batch=8, max_efficient_batch=8)


def call(pid: str, name: str, arrival: float = 0.0, parents: tuple[str, ...] | None = None) -> Pending:
    return Pending(
        query_id=pid,
        name=name,
        op="decoding",
        depth=0,
        arrival=arrival,
        requests=[{"parts": [["q", "x"]], "max_tokens": 4}],
        parents=parents,
    )


def run_call(policy, e: Pending, started: float, finished: float, result: dict | None = None) -> None:
    """Pick `e` at `started`, report it finished at `finished` with `result`."""
    d = policy.schedule([e], started, LIMITS)
    e.taken = len(e.requests)
    policy.observe(d.picks, started, finished, None if result is None else [result])


def test_the_sim_engine_reports_each_requests_seconds_in_running_iterations():
    """Every iteration costs base = 1 s; one sequence runs at a time (max_num_seqs 1).
    A (2 tokens): iteration 1 prefills and samples token 1, iteration 2 token 2 -> done at t=2,
        executor 2 s, queued 0 s.
    B (3 tokens): waits t=0..2, then iterations 3, 4, 5 -> done at t=5: 5 s of wall time, of which
        executor 3 s and queued 2 s."""

    async def main():
        e = SimLLM("llm", {"base": 1.0}, max_num_seqs=1, token_ratio=1.0, template_tokens=0)
        await e.start()
        reqs = [{"parts": [["q", "a"]], "max_tokens": n, "ignore_eos": True} for n in (2, 3)]
        out = await e.execute("decoding", reqs)
        await e.stop()
        return out

    a, b = run_virtual(main())
    assert (a["executor_s"], a["queued_s"]) == (pytest.approx(2.0), pytest.approx(0.0))
    assert (b["executor_s"], b["queued_s"]) == (pytest.approx(3.0), pytest.approx(2.0))


def test_seconds_service_charges_executor_time_and_counts_the_rest_as_waiting():
    """A call queued from t=0 is picked at t=1 and finishes at t=6 (5 s on the engine), of which the
    engine reports 3 s in its running batch. Service = 3 (not 5); waiting = 1 (teola's queue,
    t=0..1) + 2 (the engine's queue) = 3."""
    p = PLASPolicy(beta=None)
    e = call("P", "c1")
    run_call(p, e, 1.0, 6.0, {"executor_s": 3.0, "num_output_tokens": 4})
    entry = p.table.get("P")
    assert entry.service == pytest.approx(3.0)
    assert entry.run == pytest.approx(3.0)
    assert entry.wait == pytest.approx(3.0)


def test_without_executor_time_seconds_service_falls_back_to_wall_time():
    """No "executor_s" in the result (vLLM): the 5 s from pick to end are the service."""
    p = PLASPolicy(beta=None)
    e = call("P", "c1")
    run_call(p, e, 1.0, 6.0, {"num_output_tokens": 4})
    assert p.table.get("P").service == pytest.approx(5.0)


def test_the_last_queue_starts_at_the_95th_percentile_of_observed_call_service():
    """K = 4 queues, growth 2: the last queue starts at base x (1 + 2 + 4) = 7 x base. After 20 calls
    of service 1..20 s the nearest-rank 95th percentile is value #19 (ceil(0.95 x 20)) = 19 s, so
    base = 19 / 7 and the quanta are 19/7, 38/7, 76/7: the last queue starts at 19 s."""
    q = ObservedQuanta(4, 2.0, percentile=95.0, min_calls=20, refit_every=20)
    bases = [q.record(float(s)) for s in range(1, 21)]
    assert bases[:19] == [None] * 19
    assert bases[19] == pytest.approx(19 / 7)
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0


def test_a_policy_refits_its_quanta_from_completed_calls():
    """num_queues 3, growth 2, base 0.05 s: the last queue starts at 0.15 s. 16 calls of 4 s
    executor time each (the 16th triggers the fit): p95 = 4 s, span 1 + 2 = 3, base = 4/3 s, so the
    last queue starts at 4 s. A 17th call of a new program with 2 s of service charged lands in
    Q1 (range [4/3, 4)), where with the fixed 0.05 s quanta it would sit in the last queue."""
    observed = PLASPolicy(num_queues=3, beta=None)
    fixed = PLASPolicy(num_queues=3, beta=None, quanta="fixed")
    for p in (observed, fixed):
        for i in range(16):
            run_call(p, call(f"P{i}", "c"), 0.0, 4.0, {"executor_s": 4.0})
    assert observed.core.levels.quanta[:2] == [pytest.approx(4 / 3), pytest.approx(8 / 3)]
    assert fixed.core.levels.quanta[:2] == [pytest.approx(0.05), pytest.approx(0.1)]
    for p, want in ((observed, 1), (fixed, 2)):
        e = call("new", "c")
        p.schedule([e], 0.0, LIMITS)
        assert p.core.charge(e, 2.0) == want


def test_atlas_gives_every_call_of_a_program_its_scalar_unless_asked_for_parents():
    """Program P: root r (service 10) completes; then call a (parent r, service 2) completes; then
    call b arrives declaring only r as parent.
    Per-program scalar (default, Alg. 1 l.11 and l.4): after r, P's critical path = 0 + 10 = 10;
    a inherits 10, ends at 12 -> P's scalar 12; b inherits 12.
    Eq. 2 over parents (critical_path="parents"): b inherits r's end, 10."""

    def b_priority(policy) -> float:
        for name, parents, service in (("r", (), 10.0), ("a", ("r",), 2.0)):
            e = call("P", name, parents=parents)
            run_call(policy, e, 0.0, service, {"executor_s": service})
        b = call("P", "b", parents=("r",))
        policy.schedule([b], 0.0, LIMITS)
        return policy.table.call("P", "b").priority

    assert b_priority(ATLASPolicy(beta=None)) == pytest.approx(12.0)
    assert b_priority(ATLASPolicy(beta=None, critical_path="parents")) == pytest.approx(10.0)


def test_bad_options_name_the_option():
    with pytest.raises(ValueError, match="quanta must be one of"):
        PLASPolicy(quanta="sometimes")
    with pytest.raises(ValueError, match="critical_path must be one of"):
        ATLASPolicy(critical_path="longest")
    with pytest.raises(ValueError, match="percentile"):
        ObservedQuanta(8, 2.0, percentile=0)
    ProgramQueues(lambda t, p, i: 0.0, ProcessTable()).rescale(1.0)


def test_a_rerank_reaches_the_sim_engines_waiting_order():
    """Priority scheduling, one sequence at a time, 1 s per iteration. A (priority 0, 3 tokens) runs
    t=0..3; B (priority 1) and C (priority 2) wait, 2 tokens each. At t=0.5 the policy moves C to
    priority 0: after A, C runs t=3..5 and B t=5..7. Without the rerank the engine keeps the
    submission priorities: B ends at 5, C at 7."""

    def finish_times(rerank: bool) -> dict[str, float]:
        async def main():
            e = SimLLM(
                "llm",
                {"base": 1.0},
                max_num_seqs=1,
                token_ratio=1.0,
                template_tokens=0,
                scheduling="priority",
            )
            assert Capability.RERANK in capabilities_of(e)
            await e.start()
            loop = asyncio.get_running_loop()
            done: dict[str, float] = {}

            async def one(tag: str, prio: int, n: int) -> None:
                req = {
                    "parts": [["q", "a"]],
                    "max_tokens": n,
                    "ignore_eos": True,
                    "tag": tag,
                    "priority": prio,
                }
                await e.execute("decoding", [req])
                done[tag] = loop.time()

            tasks = [asyncio.ensure_future(one(*a)) for a in (("A", 0, 3), ("B", 1, 2), ("C", 2, 2))]
            await asyncio.sleep(0.5)
            if rerank:
                assert e.rerank(["C"], 0) == 1
            await asyncio.gather(*tasks)
            await e.stop()
            return done

        return run_virtual(main())

    assert finish_times(True) == {"A": pytest.approx(3.0), "C": pytest.approx(5.0), "B": pytest.approx(7.0)}
    assert finish_times(False) == {"A": pytest.approx(3.0), "B": pytest.approx(5.0), "C": pytest.approx(7.0)}


async def test_a_demotion_while_running_reaches_the_sim_engine():
    """mlfq, 8 queues, base quantum 4 tokens, growth 2: queue i starts at 0, 4, 12, 28, 60 tokens.
    One call decoding 40 tokens is demoted while it runs at token 4 (to 1), 12 (to 2) and 28 (to 3);
    each new queue index reaches the engine as the running request's priority (Capability.RERANK),
    so the engine's last priority for it is 3, not the 0 it was sent with."""
    engine = SimLLM("llm", {"base": 0.001}, scheduling="priority", token_ratio=1.0, template_tokens=0)
    seen: list[int] = []
    rerank = engine.rerank
    engine.rerank = lambda keys, priority: seen.append(priority) or rerank(keys, priority)  # type: ignore[method-assign]
    opts = {"mlfq": {"base_quantum": 4, "beta": None, "service": "tokens", "quanta": "fixed"}}
    rt = Runtime(
        {"llm": Engine("llm", kind="vllm", model="m")}, {"llm": engine}, policy="mlfq", policy_options=opts
    )
    await rt.start()
    try:
        async with Program(rt, "p") as prog:
            await prog.call("write", parent_ids=[], max_tokens=40, ignore_eos=True)
        await asyncio.sleep(0.05)  # the re-rank calls run as tasks of the engine scheduler
    finally:
        await rt.stop()
    assert seen == [1, 2, 3]


class _QueuedFirst(SimLLM):
    """A simulated engine whose requests sit 2 s in a queue of the engine before they run."""

    async def stream(self, op, requests):
        await asyncio.sleep(2.0)
        async for event in super().stream(op, requests):
            yield event


def test_a_streaming_call_is_charged_its_executor_seconds_not_its_time_queued_in_the_engine():
    """1 s per iteration; one call decoding 3 tokens runs 3 iterations (3 s of executor time, reported
    in every progress event) after 2 s in the engine's queue: it ends 5 s after it was sent. Service
    charged = 3 (the progress events' executor seconds); wall time since it was sent (5) would be
    charged only without them (`wall-time-service`). The run is counted as charged from the
    executor."""

    async def main():
        engine = _QueuedFirst("llm", {"base": 1.0}, token_ratio=1.0, template_tokens=0)
        rt = Runtime({"llm": Engine("llm", kind="vllm", model="m")}, {"llm": engine}, policy="plas")
        await rt.start()
        try:
            async with Program(rt, "p") as prog:
                await prog.call("write", parent_ids=[], max_tokens=3, ignore_eos=True)
            policy = rt.schedulers["llm"].policy
            return list(policy.quanta.services), dict(policy.charged_from)
        finally:
            await rt.stop()

    services, charged_from = run_virtual(main())
    assert services == [pytest.approx(3.0)]
    assert charged_from == {"executor": 1, "wall": 0}
