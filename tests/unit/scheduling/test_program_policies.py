"""Program-aware LLM scheduling (Autellix): process table, MLFQ core, PLAS / ATLAS policies and the
locality-aware load balancer, against hand-computed cases (whole programs on the runtime:
test_program_runs_by_hand.py)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from teola.balancers import LeastUsed, LocalityAware, RoundRobin, make_balancer
from teola.scheduling.process_table import ProcessTable
from teola.scheduling.program.atlas import ATLASPolicy, atlas_priority
from teola.scheduling.program.mlfq import MLFQPolicy, mlfq_priority
from teola.scheduling.program.plas import PLASPolicy, plas_priority
from teola.scheduling.program.queues import Levels, ProgramQueues
from teola.scheduling.registry import Limits, Pending, make_policy


def test_levels_ranges_follow_quanta():
    lv = Levels(num_queues=4, base_quantum=2.0, growth=2.0)
    assert lv.quanta[:3] == [2.0, 4.0, 8.0] and lv.quanta[3] == float("inf")
    assert lv.lows == [0.0, 2.0, 6.0, 14.0]
    assert [lv.level_of(x) for x in (0, 1.9, 2, 5.9, 6, 13.9, 14, 1e9)] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_mlfq_demotes_at_quantum_exhaustion():
    q = ProgramQueues(mlfq_priority, num_queues=4, base_quantum=2.0, growth=2.0, beta=None)
    q.admit("c", "P", "c1", 0.0)
    assert q.level("c") == 0
    assert q.charge("c", 1.0) == 0  # 1 of Q0's 2
    assert q.charge("c", 1.0) == 1  # quantum 2 exhausted -> Q1, fresh quantum 4
    assert q.charge("c", 3.0) == 1
    assert q.charge("c", 1.0) == 2  # 4 used in Q1 -> Q2
    assert q.charge("c", 100.0) == 3  # past Q2's 8 -> last queue, never further
    assert q.calls["c"].demotions == 3


def test_plas_places_new_calls_by_completed_program_service():
    q = ProgramQueues(plas_priority, num_queues=4, base_quantum=2.0, growth=2.0, beta=None)
    q.admit("a1", "A", "a1", 0.0)
    q.charge("a1", 7.0)
    q.finish("a1", 7.0)
    assert q.table.get("A").service == 7.0
    q.admit("a2", "A", "a2", 7.0)  # p = 7 in [6, 14) -> Q2
    q.admit("b1", "B", "b1", 7.5)  # new program: p = 0 -> Q0
    assert (q.level("a2"), q.level("b1")) == (2, 0)
    assert q.rank(["a2", "b1"]) == ["b1", "a2"]
    m = ProgramQueues(mlfq_priority, table=q.table, num_queues=4, base_quantum=2.0, growth=2.0, beta=None)
    m.admit("a3", "A", "a3", 8.0)  # program-blind MLFQ: top queue regardless
    assert m.level("a3") == 0


def test_anti_starvation_promotes_starving_program_and_resets_only_call_counters():
    """Program L: one completed call with service 8 (wait 0), so its next call enters Q2 of
    (2, 4, 8, inf). With beta = 1 it is promoted once (W_L + W_c) / (T_L + T_c) = W_c / 8 >= 1."""
    q = ProgramQueues(plas_priority, num_queues=4, base_quantum=2.0, growth=2.0, beta=1.0)
    q.admit("l1", "L", "l1", 0.0)
    q.charge("l1", 8.0)
    q.finish("l1", 8.0)
    q.admit("l2", "L", "l2", 8.0)
    q.admit("s1", "S", "s1", 8.0)
    assert q.level("l2") == 2
    q.wait("l2", 7.0)
    assert not q.starving("l2") and q.level("l2") == 2  # 7 / 8 < 1
    q.wait("l2", 1.0)
    assert q.starving("l2") and q.level("l2") == 0  # 8 / 8 >= 1: promoted to Q0
    st = q.calls["l2"]
    assert (st.wait, st.service, st.promotions) == (0.0, 0.0, 1)
    assert q.table.call("L", "l2").wait == 8.0  # the table keeps the real totals
    assert q.rank(["l2", "s1"]) == ["s1", "l2"]  # promoted to Q0's tail, behind s1
    assert not q.starving("s1")  # already in Q0


def test_atlas_critical_path_priority_on_a_small_dag():
    """a (root, 2 units) -> b (5), c (1) -> d. p(a)=0, p(b)=p(c)=0+2=2, p(d)=max(2+5, 2+1)=7;
    after d runs 3 units the program's critical path is 7+3=10. A call with undeclared parents
    inherits the program's longest critical path so far (the per-program scalar)."""
    t = ProcessTable()
    q = ProgramQueues(atlas_priority, table=t, num_queues=8, base_quantum=1.0, growth=1.0, beta=None)
    q.admit("a", "P", "a", 0.0, parents=())
    assert t.call("P", "a").priority == 0
    q.charge("a", 2.0)
    q.finish("a", 2.0)
    q.admit("b", "P", "b", 2.0, parents=["a"])
    q.admit("c", "P", "c", 2.0, parents=["a"])
    assert t.call("P", "b").priority == 2 == t.call("P", "c").priority
    q.charge("c", 1.0)
    q.finish("c", 3.0)
    assert t.get("P").critical_path == 3
    q.charge("b", 5.0)
    q.finish("b", 7.0)
    assert t.get("P").critical_path == 7
    q.admit("d", "P", "d", 7.0, parents=["b", "c"])
    assert t.call("P", "d").priority == 7
    assert q.level("d") == 7
    q.charge("d", 3.0)
    q.finish("d", 10.0)
    assert t.get("P").critical_path == 10
    assert t.get("P").service == 11  # PLAS's sum, for comparison
    q.admit("e", "P", "e", 10.0)  # parents unknown -> program scalar
    assert t.call("P", "e").priority == 10


def pending(
    qid: str, name: str, arrival: float, max_tokens: int = 16, n: int = 1, op: str = "decoding"
) -> Pending:
    reqs = [{"parts": [["user", "hi"]], "complete": True, "max_tokens": max_tokens} for _ in range(n)]
    return Pending(
        query_id=qid, name=name, op=op, depth=0, arrival=arrival, requests=reqs, tokens=[max_tokens + 2] * n
    )


def test_plas_policy_schedules_new_programs_first_and_sets_engine_priority():
    pol = PLASPolicy(num_queues=4, base_quantum=32, growth=2, beta=None, service="tokens")
    lim = Limits(max_batch=8, max_efficient_batch=8)
    x1 = pending("X", "x1", 0.0, max_tokens=100)
    d = pol.schedule([x1], 0.0, lim)
    assert [(p.entry, p.count, p.priority) for p in d.picks] == [(x1, 1, 0)]
    x1.taken = 1  # the engine scheduler applied the pick
    pol.observe(d.picks, 0.0, 1.0)  # x1 decoded (at most) 100 tokens -> X's service 100
    assert pol.table.get("X").service == 100
    x2, y1 = pending("X", "x2", 2.0), pending("Y", "y1", 3.0)
    d = pol.schedule([x2, y1], 3.0, lim)
    assert [(p.entry.name, p.priority) for p in d.picks] == [("y1", 0), ("x2", 2)]  # 100 in [96, 224)
    small = Limits(max_batch=1, max_efficient_batch=1)
    assert [
        p.entry.name
        for p in PLASPolicy(num_queues=4, base_quantum=32, beta=None, table=pol.table, service="tokens")
        .schedule([x2, y1], 3.0, small)
        .picks
    ] == ["y1"]


def test_policy_completes_calls_only_after_all_requests_ran_and_end_program_forgets():
    pol = ATLASPolicy(service="seconds", beta=None)
    lim = Limits(max_batch=2, max_efficient_batch=2)
    e = pending("Q", "map", 0.0, n=3)
    d = pol.schedule([e], 0.0, lim)
    assert d.size == 2
    e.taken = 2
    pol.observe(d.picks, 0.0, 0.5)
    assert pol.table.call("Q", "map").service == 0.5 and pol.table.get("Q").completed == 0
    d = pol.schedule([e], 0.5, lim)
    e.taken = 3
    pol.observe(d.picks, 0.5, 1.0)
    assert pol.table.get("Q").completed == 1 and pol.table.get("Q").critical_path == 1.0
    pol.end_program("Q")
    assert "Q" not in pol.table and not pol.core.calls


def test_multi_step_reranks_only_on_membership_change_or_every_n_steps():
    q = ProgramQueues(mlfq_priority, num_queues=4, base_quantum=1.0, growth=2.0, beta=None, rerank_every=3)
    q.admit("a", "A", "a", 0.0)
    q.admit("b", "B", "b", 0.0)
    assert q.rank(["a", "b"]) == ["a", "b"] and q.reranks == 1
    q.charge("a", 1.0)  # a demoted to Q1, but ...
    assert q.rank(["a", "b"]) == ["a", "b"]  # ... the order is kept (step 1 of 3)
    assert q.rank(["a", "b"]) == ["a", "b"]  # step 2 of 3
    assert q.rank(["a", "b"]) == ["b", "a"]  # step 3: re-ranked
    q.admit("c", "C", "c", 1.0)
    assert q.rank(["a", "b", "c"]) == ["b", "c", "a"] and q.reranks == 3  # membership changed


def test_policies_registered_by_name_and_validate_options():
    assert isinstance(make_policy("plas"), PLASPolicy)
    assert isinstance(make_policy("atlas", service="seconds"), ATLASPolicy)
    assert isinstance(make_policy("mlfq", num_queues=3), MLFQPolicy)
    with pytest.raises(ValueError, match="service"):
        make_policy("plas", service="joules")
    with pytest.raises(ValueError, match="num_queues"):
        make_policy("atlas", num_queues=0)
    with pytest.raises(ValueError, match="beta"):
        make_policy("mlfq", beta=0)
    with pytest.raises(KeyError, match="admit"):
        ProgramQueues(plas_priority).charge("nope", 1.0)


def test_process_table_tracks_and_ends_programs():
    t = ProcessTable()
    t.call_arrived("P", "c1", 1.0)
    t.call_started("P", "c1", 3.0)
    t.add_service("P", "c1", 4.0)
    t.call_finished("P", "c1", 7.0)
    e = t.get("P")
    assert (e.service, e.wait, e.completed, e.last_arrival, e.last_completion) == (4.0, 2.0, 1, 1.0, 7.0)
    assert not e.calls
    t.assign_engine("P", "inst0")
    assert t.engine_of("P") == "inst0"
    assert t.end_program("P") is e and "P" not in t and t.engine_of("P") is None
    assert t.call_finished("P", "c1", 8.0) is None
    with pytest.raises(ValueError, match="program id"):
        t.call_arrived("", "c", 0.0)


def insts(*loads: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(name=f"i{k}", outstanding=n) for k, n in enumerate(loads)]


def test_locality_balancer_pins_long_calls_and_spreads_short_ones():
    i0, i1 = insts(0, 0)
    lb = LocalityAware(threshold=2048)
    assert lb.route([i0, i1], "P", 4000) is i0  # first long call: least used, then pinned
    assert lb.table.engine_of("P") is i0
    i0.outstanding = 5
    assert lb.route([i0, i1], "P", 5000) is i0  # long calls stay although i0 is busier
    assert lb.route([i0, i1], "P", 2048) is i1  # short calls go to the least used
    i1.outstanding = 9
    assert lb.route([i0, i1], "P", 100) is i0
    assert lb.route([i0, i1], "Q", 3000) is i0 and lb.table.engine_of("Q") is i0
    lb.table.end_program("P")
    assert lb.route([i0, i1], "P", 4000) is i0 and lb.route([i1], "P", 4000) is i1  # re-pinned when gone
    with pytest.raises(ValueError, match="threshold"):
        LocalityAware(threshold=-1)


def test_round_robin_and_least_used():
    i0, i1, i2 = insts(3, 1, 1)
    rr = RoundRobin()
    assert [rr.route([i0, i1, i2], "P", 10) for _ in range(4)] == [i0, i1, i2, i0]
    assert LeastUsed().route([i0, i1, i2], "P", 10) is i1
    assert isinstance(make_balancer("round_robin"), RoundRobin)
    with pytest.raises(ValueError, match="unknown load balancer"):
        make_balancer("random")


class EchoLLM:
    """A fake LLM backend: echoes the prompt, records each batch's (program, priority) order."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, int]]] = []

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def execute(self, op: str, requests: list[dict]) -> list[dict]:
        self.batches.append([(r["parts"][-1][1], r["priority"]) for r in requests])
        return [{"text": "echo " + r["parts"][-1][1], "num_output_tokens": r["max_tokens"]} for r in requests]


def test_program_calls_run_through_the_runtime_engine_scheduler_with_program_priorities():
    from teola.api.program import Program
    from teola.ir.engine_spec import Engine
    from teola.runtime import Runtime

    async def main():
        backend = EchoLLM()
        rt = Runtime(
            {"llm": Engine("llm", kind="vllm", model="m")},
            {"llm": backend},
            policy="atlas",
            policy_options={
                "atlas": {"base_quantum": 8, "beta": None, "service": "tokens", "critical_path": "parents"}
            },
        )
        await rt.start()
        try:
            async with Program(rt, "P") as prog:
                root = await prog.call("root", parent_ids=[], max_tokens=20)
                kids = [await prog.call(f"kid{i}", parent_ids=[root.call_id], max_tokens=4) for i in range(2)]
                table = rt.schedulers["llm"].policy.table
                assert table.get("P").critical_path == 24  # 20 (root) + 4 (a kid), as decoded
                assert str(root) == "echo root" and kids[1].call_id == "call-3"
            assert "P" not in table
            return backend.batches
        finally:
            await rt.stop()

    batches = asyncio.run(main())
    assert batches == [[("root", 0)], [("kid0", 1)], [("kid1", 1)]]  # p=20 -> Q1 of (8, 16, ...)


def test_program_rejects_bad_input():
    from teola.api.program import Program
    from teola.runtime import Runtime

    with pytest.raises(ValueError, match="program_id"):
        Program(object(), "")
    with pytest.raises(RuntimeError, match="not started"):
        asyncio.run(Program(Runtime({}), "P").call("hi"))


def test_seconds_service_is_preemptive_and_charges_a_running_call_its_engine_time():
    """issue 62: Autellix charges model execution time; a call that ran 0.06 s has used up Q0's
    0.05 s quantum (-> Q1) and a new call in Q0 displaces it."""
    pol = MLFQPolicy(
        service="seconds", num_queues=4, base_quantum=0.05, growth=2.0, beta=None, rerank_every=1
    )
    assert pol.preemptive
    long = pending("L", "long", 0.0)
    d = pol.schedule([long], 0.0, Limits(max_batch=1, max_efficient_batch=1))
    long.taken = 1
    assert pol.progress(long, 5, elapsed=0.04) == 0  # 0.04 s of 0.05
    assert pol.progress(long, 7, elapsed=0.06) == 1  # + 0.02 s: quantum used up
    short = pending("S", "short", 0.06)
    assert pol.victims([long], [short], free=0, now=0.06) == [long]
    pol.preempted(d.picks[0])
    assert pol.table.call("L", "long").service == pytest.approx(0.06)


def test_starvation_ratio_is_waiting_over_execution_seconds_under_token_service():
    """issue 62: priorities stay in decoded tokens, but W / T compares seconds with seconds.
    Program L: one call of 100 tokens that ran 1.0 s without waiting, so its next call enters
    Q2 of (32, 64, 128, inf) tokens; with beta 2 it is promoted once it has waited 2.0 s
    (W / T = 2.0 / 1.0), not after 200 s (2 s per token, as when T was counted in tokens)."""
    q = ProgramQueues(plas_priority, num_queues=4, base_quantum=32.0, growth=2.0, beta=2.0)
    q.admit("l1", "L", "l1", 0.0)
    q.charge("l1", 100.0, seconds=1.0)
    q.finish("l1", 1.0)
    assert (q.table.get("L").service, q.table.get("L").run) == (100.0, 1.0)
    q.admit("l2", "L", "l2", 1.0)
    assert q.level("l2") == 2
    q.wait("l2", 1.5)
    assert not q.starving("l2")  # 1.5 / 1.0 < 2
    q.wait("l2", 0.5)
    assert q.starving("l2") and q.level("l2") == 0  # 2.0 / 1.0 >= 2


def starving_set_up(**options):
    """PLAS (queues of 32, 64, 128, inf tokens; beta 2; one slot): program L's first call decoded
    100 tokens in 1.0 s; r (program R) runs from t=1.0 and has decoded 40 tokens in 0.5 s (Q1);
    L's second call l2 (Q2) waits from t=1.0. Returns the policy, r, r's decision and l2."""
    pol = PLASPolicy(
        num_queues=4, base_quantum=32, growth=2, beta=2.0, rerank_every=1, service="tokens", **options
    )
    lim = Limits(max_batch=1, max_efficient_batch=1)
    l1 = pending("L", "l1", 0.0, max_tokens=100)
    d = pol.schedule([l1], 0.0, lim)
    l1.taken = 1
    pol.observe(d.picks, 0.0, 1.0, [{"num_output_tokens": 100}])
    r = pending("R", "r", 1.0)
    d_r = pol.schedule([r], 1.0, lim)
    r.taken = 1
    assert pol.progress(r, 40, elapsed=0.5) == 1
    return pol, r, d_r, pending("L", "l2", 1.0)


def test_policy_promotes_a_starving_call_that_then_preempts_a_demoted_one():
    """The same through the policy: observe charges l1 100 tokens and 1.0 s; r runs 40 tokens in
    0.5 s (Q1); l2 (Q2) waits from t=1.0: at t=2.5 (1.5 s waited) it does not displace r, at t=3.0
    (2.0 s) it is promoted to Q0 and does."""
    pol, r, _, l2 = starving_set_up()
    assert pol.victims([r], [l2], free=0, now=2.5) == []
    assert pol.victims([r], [l2], free=0, now=3.0) == [r]
    assert pol.core.calls[l2].promotions == 1 and pol.core.promoted == 1
    assert pol.preempted_for == {"kv": 0, "ranked": 0, "promoted": 1}


def test_promotion_admit_ranks_a_promoted_call_first_but_preempts_only_from_its_queue():
    """promotion="admit" (a named deviation): the set-up above; at t=3.0 l2 is promoted to Q0 but
    displaces nothing, since it came from Q2 and r runs in Q1; when r ends, l2 is admitted before
    a Q1 call that waits with it, and once it has run it preempts from its own queue again."""
    pol, r, d_r, l2 = starving_set_up(promotion="admit")
    lim = Limits(max_batch=1, max_efficient_batch=1)
    assert pol.victims([r], [l2], free=0, now=3.0) == []
    st = pol.core.calls[l2]
    assert (st.promotions, st.level, pol.core.preempt_level(l2)) == (1, 0, 2)
    pol.observe(d_r.picks, 1.0, 3.0, [{"num_output_tokens": 40}])
    other = pending("O", "o1", 2.9)
    pol.core.admit(other, "O", "o1", 2.9)
    pol.core.charge(other, 40.0, seconds=0.1)  # Q1, like r was
    picked = pol.schedule([other, l2], 3.0, lim)
    assert [p.entry for p in picked.picks] == [l2]
    assert pol.progress(l2, 1, elapsed=0.01) == 0 and pol.core.preempt_level(l2) == 0


def test_promotion_option_is_validated():
    with pytest.raises(ValueError, match="promotion"):
        make_policy("plas", promotion="sometimes")
    assert make_policy("atlas", promotion="admit").core.promotion == "admit"


def test_default_service_is_autellix_model_execution_time():
    """issue 62: without options a program policy charges engine seconds (Autellix's unit): a call
    that ran 0.3 s is charged 0.3, whatever it decoded, and its 0.05 s quantum is used up."""
    pol = make_policy("plas")
    assert pol.service == "seconds"
    e = pending("P", "c", 0.0, max_tokens=100)
    d = pol.schedule([e], 0.0, Limits(max_batch=1, max_efficient_batch=1))
    e.taken = 1
    assert pol.progress(e, 50, elapsed=0.3) > 0
    pol.observe(d.picks, 0.0, 0.3, [{"num_output_tokens": 50}])
    assert pol.table.get("P").service == pytest.approx(0.3)


def test_a_preempted_call_waits_from_its_preemption_not_from_before_its_run():
    """Autellix counts waiting as time queued, not time run. A call picked at t=0 runs 4 s (4 tokens,
    charged as service), is preempted at t=4 and next seen queued at t=5: it has waited 1 s (4 to 5),
    not 5 s (0 to 5: its run counted again, as waiting, which fed the anti-starvation ratio W / T)."""
    pol = PLASPolicy(num_queues=4, base_quantum=2.0, growth=2.0, beta=None, service="tokens", rerank_every=1)
    call = pending("P", "c", 0.0, max_tokens=16)
    d = pol.schedule([call], 0.0, Limits(max_batch=1, max_efficient_batch=1))
    call.taken = 1
    pol.progress(call, 4, elapsed=4.0)
    pol.preempted(d.picks[0], 4.0)
    call.taken = 0
    pol.schedule([call], 5.0, Limits(max_batch=1, max_efficient_batch=1))
    assert pol.table.call("P", "c").wait == pytest.approx(1.0)
