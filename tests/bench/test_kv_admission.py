"""bench.studies.sim.kv_admission on hand-computed cases: calls go to the simulated engine only while its free
KV covers them (vLLM's admission by KV blocks), in the wrapped policy's order."""

from __future__ import annotations

from types import SimpleNamespace

from bench.studies.sim.kv_admission import KVAdmission, free_tokens
from teola.scheduling.registry import Limits, Pending, RequestQueue, make_policy

ROOMY = Limits(max_batch=256, max_efficient_batch=256)  # room for every queued call
ONE = Limits(max_batch=1, max_efficient_batch=1)


def test_free_tokens_are_the_free_blocks_less_what_the_engine_already_waits_for():
    assert free_tokens(10, 16, []) == 160
    assert free_tokens(10, 16, [100]) == 60  # 160 - the 100 tokens a waiting call needs
    assert free_tokens(10, 16, [100, 60]) is None  # 0 left with calls waiting: hold
    assert free_tokens(10, 16, [200]) is None
    assert free_tokens(0, 16, []) == 1  # nothing waits in the engine: the next call still goes


def engine(free: int, waiting: list[int]) -> SimpleNamespace:
    return SimpleNamespace(
        pool=SimpleNamespace(free=free, block_size=16),
        waiting=[SimpleNamespace(ids=[0] * n) for n in waiting],
        paused={},
    )


def call(name: str, arrival: float, tokens: int) -> Pending:
    return Pending(
        query_id=name,
        name=name,
        op="decoding",
        depth=0,
        arrival=arrival,
        requests=[{"max_tokens": 10}],
        tokens=[tokens],
    )


def queue() -> RequestQueue:
    return RequestQueue([call("a", 0.0, 100), call("b", 1.0, 100), call("c", 2.0, 100)])


def test_a_batch_takes_calls_in_policy_order_until_the_free_kv_is_spent():
    gate = KVAdmission(make_policy("fcfs"), engine(15, []))  # 240 tokens free
    picks = gate.schedule(queue(), 0.0, ROOMY).picks
    assert [p.entry.name for p in picks] == ["a", "b"]  # 100 + 100; c's 100 > the 40 left
    gate = KVAdmission(make_policy("fcfs"), engine(0, []))  # full, nothing waiting: one call goes
    assert [p.entry.name for p in gate.schedule(queue(), 0.0, ROOMY).picks] == ["a"]


def test_nothing_is_sent_while_the_engine_waits_for_kv():
    gate = KVAdmission(make_policy("fcfs"), engine(4, [80]))  # 64 free < the 80 a waiting call needs
    assert gate.schedule(queue(), 0.0, ROOMY).picks == [] and gate.held == 1
    gate = KVAdmission(make_policy("fcfs"), engine(20, [80]))  # 320 - 80 = 240 left: two more calls
    assert len(gate.schedule(queue(), 0.0, ROOMY).picks) == 2


def test_the_wrapper_is_the_policy_for_everything_else():
    lamps = make_policy("lamps", api_defaults={"tool": 1.0})
    gate = KVAdmission(lamps, engine(100, []))
    # lamps hears running calls' progress: its starvation counter counts engine iterations (issue 62)
    assert gate.name == "lamps" and gate.preemptive and gate.wants_progress
    gate.observe_api("tool", 3.0)
    assert lamps.api_mean["tool"] == (3.0, 1)  # the default only seeds: the first observation replaces it


def test_request_order_fcfs_puts_a_continuation_ahead_of_later_requests():
    policy = make_policy("fcfs-request")
    cont = Pending(
        query_id="r0",
        name="r0-1",
        op="decoding",
        depth=0,
        arrival=9.0,
        requests=[{"max_tokens": 5, "request_arrival": 1.0}],
        tokens=[500],
    )
    new = Pending(
        query_id="r1",
        name="r1-0",
        op="decoding",
        depth=0,
        arrival=5.0,
        requests=[{"max_tokens": 5, "request_arrival": 5.0}],
        tokens=[100],
    )
    picks = policy.schedule(RequestQueue([new, cont]), 10.0, ONE).picks
    assert picks[0].entry is cont  # its request arrived at 1 s, before r1's at 5 s (teola's fcfs: r1 first)
    assert make_policy("fcfs").schedule(RequestQueue([new, cont]), 10.0, ONE).picks[0].entry is new


def test_a_call_resuming_on_preserved_kv_goes_first_whatever_the_policy_order():
    llm = engine(0, [500])  # full, and a call waits in the engine: new calls are held
    llm.paused = {
        "r9": SimpleNamespace(held=object()),
        "r8": SimpleNamespace(held=None),
    }  # r8's KV was swapped
    cont = Pending(
        query_id="r9",
        name="r9-1",
        op="decoding",
        depth=0,
        arrival=9.0,
        requests=[{"max_tokens": 5, "kv_key": "r9"}],
        tokens=[900],
    )
    swapped = Pending(
        query_id="r8",
        name="r8-1",
        op="decoding",
        depth=0,
        arrival=8.0,
        requests=[{"max_tokens": 5, "kv_key": "r8"}],
        tokens=[900],
    )
    q = RequestQueue([call("a", 0.0, 100), swapped, cont])
    gate = KVAdmission(make_policy("fcfs"), llm)
    assert [p.entry.name for p in gate.schedule(q, 10.0, ROOMY).picks] == ["r9-1"]
    assert gate.resumes == 1
    q.discard(cont)
    assert gate.schedule(q, 10.0, ROOMY).picks == []  # the rest wait for KV


def test_lamps_resumes_a_preserved_pause_first_without_the_kv_bound():
    """Issue 18: with admission capped by the number of calls only (bench.studies.sim.sim_lamps' default), a
    call resuming on preserved KV still goes first; LAMPS' ranking alone puts it last (its context
    is the largest), so its KV stayed pinned in teola's queue while new calls filled the cap."""
    llm = engine(0, [500])  # full, a call waits in the engine: with the KV bound nothing new would go
    llm.paused = {"r9": SimpleNamespace(held=object())}
    cont = Pending(
        query_id="r9",
        name="r9-1",
        op="decoding",
        depth=0,
        arrival=9.0,
        requests=[{"max_tokens": 40, "kv_key": "r9", "api": "tool", "post_tokens": 40}],
        tokens=[2000],
    )
    new = Pending(
        query_id="a",
        name="a-0",
        op="decoding",
        depth=0,
        arrival=0.0,
        requests=[{"max_tokens": 40, "kv_key": "a", "api": "tool", "post_tokens": 40}],
        tokens=[400],
    )
    lamps = make_policy(
        "lamps",
        api_defaults={"tool": 0.1},
        step_s=0.02,
        fwd_s_per_token=1e-4,
        swap_s_per_token=2e-5,
        batch_size=64,
    )
    assert lamps.schedule(RequestQueue([new, cont]), 10.0, ONE).picks[0].entry is new
    gate = KVAdmission(lamps, llm, kv_bound=False)
    assert [
        p.entry.name
        for p in gate.schedule(
            RequestQueue([new, cont]), 10.0, Limits(max_batch=64, max_efficient_batch=64)
        ).picks
    ] == ["r9-1"]
    # no resume waiting: the policy's batch, not bounded by the engine's free KV
    assert [p.entry.name for p in gate.schedule(queue(), 0.0, ROOMY).picks] == ["a", "b", "c"]


def test_sim_lamps_bounds_admission_by_kv_only_under_kv_admission(monkeypatch):
    """bench.studies.sim.sim_lamps wraps the policy with KVAdmission only under --kv-admission; otherwise the
    policy itself runs preserved continuations first (a tiny simulated run; no timing)."""
    import bench.studies.sim.sim_lamps as sim

    made = []

    class Recording(KVAdmission):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            made.append(self)

    monkeypatch.setattr(sim, "KVAdmission", Recording)
    for system, bound in (("LAMPS", False), ("FCFS+INFERCEPT", True)):
        made.clear()
        sim.run_point(
            "a100-llama2-7b", "toolbench", system, 0.5, 0.0, 4.0, 0.0, setup={"kv_admission": bound}
        )
        assert len(made) == int(bound) and all(m.kv_bound for m in made)


def test_sim_lamps_marks_the_continuation_of_a_preserved_pause(monkeypatch):
    """A call continuing after a preserved pause carries `resumes_preserved`, as teola.api.tool_calls
    marks it; one after a swapped pause does not."""
    import bench.studies.sim.sim_lamps as sim
    from teola.runtime import Runtime

    plan = iter(["preserve", "swap"] * 50)
    monkeypatch.setattr(sim, "handling_for", lambda *a, **k: next(plan))
    sent = []
    submit = Runtime.submit_call

    async def recording(self, engine, req, **kw):
        sent.append(dict(req))
        return await submit(self, engine, req, **kw)

    monkeypatch.setattr(Runtime, "submit_call", recording)
    sim.run_point("a100-llama2-7b", "toolbench", "LAMPS", 0.5, 0.0, 4.0, 0.0)
    by_request: dict[str, list[dict]] = {}
    for req in sent:
        by_request.setdefault(req["kv_key"], []).append(req)
    checked = 0
    for reqs in by_request.values():
        for before, after in zip(reqs, reqs[1:]):
            assert bool(after.get("resumes_preserved")) == (before["pause_kv"] == "preserve")
            checked += 1
    assert checked >= 2
