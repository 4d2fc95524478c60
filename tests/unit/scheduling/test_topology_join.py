"""Topology-aware batching joins another query's entries only where the engine's op costs say it
pays (teola.scheduling.primitive.topology): every expected batch below is worked by hand from
`delayed * added <= (1 + behind) * base_s`."""

import pytest

from engines.machine.op_costs import OpCost
from teola.scheduling.primitive.topology import added_seconds, pays_to_join
from teola.scheduling.registry import Limits, RequestQueue, make_policy
from tests.factories import pending


def entry(qid, name, arrival, texts, op="reranking", depth=2):
    return pending(qid, name, arrival, [{"query": "", "text": t} for t in texts], op, depth)


def cost(base_s, item_s, item_chars=0.0):
    return OpCost(base_s=base_s, item_s=item_s, source="test", item_chars=item_chars)


def limits(c, op="reranking", efficient=64, **kw):
    return Limits(max_batch=64, max_efficient_batch=efficient, op_costs={op: c}, **kw)


def picked(queue, lim, **options):
    d = make_policy("topology", **options).schedule(RequestQueue(queue), 1.0, lim)
    return [(p.entry.name, p.count) for p in d.picks]


def two_rerankings():
    return [entry("q1", "r1", 0.0, ["p"] * 8), entry("q2", "r2", 0.1, ["p"] * 9)]


def test_on_cpu_like_costs_a_second_query_waits_for_the_next_batch():
    # q2 adds 9 x 0.1 = 0.9 s to q1's batch (1 query delayed); running apart costs it one base, 5 ms
    assert picked(two_rerankings(), limits(cost(0.005, 0.1))) == [("r1", 8)]


def test_on_gpu_like_costs_queries_batch_together():
    # 9 x 1 ms = 9 ms added against a 50 ms request: joining pays
    assert picked(two_rerankings(), limits(cost(0.05, 0.001))) == [("r1", 8), ("r2", 9)]


def test_queries_queued_behind_make_joining_pay():
    c = cost(0.01, 0.004)  # 3 items add 12 ms
    alone = [entry("q1", "a", 0.0, ["p"] * 3), entry("q2", "b", 0.1, ["p"] * 3)]
    # q2: 1 x 12 ms > (1 + 0) x 10 ms
    assert picked(alone, limits(c)) == [("a", 3)]
    # with q3 behind, q2: 1 x 12 ms <= (1 + 1) x 10 ms joins; q3: 2 delayed x 12 ms > (1 + 0) x 10 ms
    three = [*alone, entry("q3", "c", 0.2, ["p"] * 3)]
    assert picked(three, limits(c)) == [("a", 3), ("b", 3)]


def test_a_passed_over_query_counts_among_the_delayed():
    c = cost(0.01, 0.001)
    q = [
        entry("q1", "a", 0.0, ["p"]),
        entry("q2", "big", 0.1, ["p"] * 40),  # 1 delayed x 40 ms > (1 + 2 behind) x 10 ms: passed over
        entry("q3", "small", 0.2, ["p"] * 6),  # 2 delayed (q1, q2) x 6 ms <= (1 + 1 behind) x 10 ms
        entry("q4", "tiny", 0.3, ["p"] * 2),  # 3 delayed (q1, q2, q3) x 2 ms <= (1 + 0) x 10 ms
    ]
    assert picked(q, limits(c)) == [("a", 1), ("small", 6), ("tiny", 2)]


def test_an_items_seconds_scale_with_its_text_against_the_probes():
    c = cost(0.01, 0.001, item_chars=100)
    short = [entry("q1", "a", 0.0, ["p"]), entry("q2", "b", 0.1, ["x" * 900])]
    # 900 characters = 9 probe items = 9 ms <= 10 ms: joins
    assert picked(short, limits(c)) == [("a", 1), ("b", 1)]
    long = [entry("q1", "a", 0.0, ["p"]), entry("q2", "b", 0.1, ["x" * 2000])]
    assert picked(long, limits(c)) == [("a", 1)]  # 20 probe items: 20 ms > 10 ms


def test_added_seconds_count_only_the_requests_that_fit():
    c = cost(0.0, 0.5)
    e = entry("q1", "a", 0.0, ["p"] * 6)
    assert added_seconds(c, [e], slots=4) == pytest.approx(2.0)
    assert added_seconds(c, [e, entry("q1", "b", 0.0, ["p"] * 6)], slots=8) == pytest.approx(4.0)
    assert pays_to_join(c, 0.0, 3, 0) and not pays_to_join(c, 0.1, 1, 5)


def test_the_first_query_takes_the_whole_batch_whatever_its_cost():
    q = [entry("q1", "a", 0.0, ["p"] * 5), entry("q1", "b", 0.0, ["p"] * 5)]
    assert picked(q, limits(cost(0.0, 10.0), efficient=8)) == [("a", 5), ("b", 3)]


def test_without_costs_or_with_the_option_off_algorithm_2_joins_as_published():
    both = [("r1", 8), ("r2", 9)]
    assert picked(two_rerankings(), Limits(max_batch=64, max_efficient_batch=64)) == both
    assert picked(two_rerankings(), limits(cost(0.005, 0.1)), join_by_cost=False) == both
    # another op's costs do not apply
    assert picked(two_rerankings(), limits(cost(0.005, 0.1), op="embedding")) == both


def test_llm_engines_with_a_token_budget_ignore_op_costs():
    q = [entry("q1", "a", 0.0, ["p"], op="prefilling"), entry("q2", "b", 0.1, ["p"], op="prefilling")]
    for e in q:
        e.tokens = [10]
    lim = limits(cost(0.0, 1.0), op="prefilling", token_budget=1000)
    assert picked(q, lim) == [("a", 1), ("b", 1)]


def test_a_bad_option_is_named():
    with pytest.raises(ValueError, match="join_by_cost"):
        make_policy("topology", join_by_cost="yes")


def test_the_engine_scheduler_hands_the_policy_its_instances_reported_costs():
    from engines.sim.sim_engine import SimEngine
    from teola.ir.engine_spec import Engine
    from teola.runtime import Runtime
    from teola.sim.virtual_loop import run_virtual

    reported = cost(0.005, 0.1, item_chars=80.0)
    engine = SimEngine("rr", ["reranking"], op_cost={"reranking": {"base": 0.005, "per_item": 0.1}})
    engine.profile.op_costs = {"reranking": reported.as_dict()}  # what an adapter reports at start

    async def main():
        rt = Runtime({"rr": Engine("rr", kind="reranker")}, {"rr": engine})
        await rt.start()
        try:
            sched = rt.schedulers["rr"]
            return sched._limits(sched.instances[0]).op_costs
        finally:
            await rt.stop()

    assert run_virtual(main()) == {"reranking": reported}
