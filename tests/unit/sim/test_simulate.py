"""The simulator end to end: a shipped app's unchanged runtime on simulated engines in virtual time
(teola.sim.run): every query answered, deterministic for a seed, engines chosen per profile; and the
differential check: the same workload on the same simulated engines gives the same schedule on the
virtual clock as on the wall clock."""

from __future__ import annotations

import asyncio

import pytest

import apps.advanced_rag as advanced_rag
import apps.naive_rag as naive_rag
from engines.sim.llm import SimLLM
from engines.sim.profile import load_profile, simulated_engine
from teola.sim.run import query_variants, simulate, use_profile
from teola.sim.virtual_loop import run_virtual

PROFILE = {
    "name": "test",
    "provenance": "derived",
    "source": "hand-written for tests",
    "engines": {
        "vllm": {
            "cost": {"base": 0.02, "prefill_token": 1e-4, "decode_seq": 2e-3, "context_token": 0.0},
            "max_num_seqs": 8,
            "lengths": {"text": [10, 20, 30], "split": [24, 36]},
        },
        "sentence_transformers": {"latency": {"1": 0.01, "32": 0.08}},
        "pgvector": {"op_latency": {"ingestion": {"1": 0.002, "64": 0.02}, "searching": {"1": 0.003}}},
        "reranker": {"latency": {"1": 0.005, "32": 0.05}},
    },
}
DOCS = [
    " ".join(f"Sentence {i} about topic {j % 7} and the city of Paris." for i in range(60)) for j in range(3)
]
QUERY = {"question": "Which city is the topic about?", "documents": DOCS}


def test_a_shipped_app_serves_every_query_in_virtual_time_and_repeats_exactly():
    first = simulate(advanced_rag.build(), PROFILE, rate=2.0, queries=query_variants(QUERY, 25), seed=3)
    again = simulate(advanced_rag.build(), PROFILE, rate=2.0, queries=query_variants(QUERY, 25), seed=3)
    other = simulate(advanced_rag.build(), PROFILE, rate=2.0, queries=query_variants(QUERY, 25), seed=4)
    assert first.failed == 0 and len(first.latencies) == 25
    assert first.latencies == again.latencies  # same seed, same trace
    assert first.latencies != other.latencies
    assert first.span > 10 and first.wall_s < first.span  # faster than real time
    s = first.summary()
    assert 0 < s["mean_s"] <= s["p99_s"] and 0 < s["utilisation"]["llm/0"] <= 1
    assert first.provenance == "derived" and "simulated" in first.table()


def test_more_llm_instances_serve_an_overload_with_lower_latency():
    one = simulate(naive_rag.build(), PROFILE, rate=8.0, queries=query_variants(QUERY, 40))
    four = simulate(
        naive_rag.build(), PROFILE, rate=8.0, queries=query_variants(QUERY, 40), instances={"llm": 4}
    )
    assert set(four.utilisation) >= {"llm/0", "llm/3"}
    assert four.summary()["mean_s"] < one.summary()["mean_s"]


def test_engines_are_built_from_the_profile_and_mistakes_are_named():
    llm = simulated_engine("llm", "vllm", PROFILE, {"max_num_seqs": 3, "cpu_binding": "1"})
    assert isinstance(llm, SimLLM) and llm.max_num_seqs == 3
    with pytest.raises(ValueError, match="has no model of kind 'search'"):
        simulated_engine("web", "search", PROFILE)
    with pytest.raises(ValueError, match="not found"):
        load_profile("no-such-profile")
    with pytest.raises(ValueError, match="provenance"):
        load_profile({"engines": {}})
    app = naive_rag.build()
    with pytest.raises(ValueError, match="does not have"):
        use_profile(app, PROFILE, {"gpu": 2})
    with pytest.raises(ValueError, match="rate"):
        simulate(app, PROFILE, rate=0, queries=1)


def schedule(virtual: bool) -> tuple[list, list[int]]:
    """The LLM engine's iterations and the order queries finished, for one small workload."""
    profile = {
        **PROFILE,
        "engines": {
            **PROFILE["engines"],
            "vllm": {
                **PROFILE["engines"]["vllm"],
                "cost": {"base": 0.05, "prefill_token": 2e-5, "decode_seq": 0.01},
            },
        },
    }
    app = naive_rag.build()
    use_profile(app, profile)
    queries = query_variants(QUERY, 4)
    # queries 2 and 3 send their LLM call about 30 ms (of ~70 ms iterations) from any iteration
    # boundary, so the wall clock's own delays cannot move it into another iteration
    arrivals = [0.0, 0.0, 0.36, 0.74]

    async def main() -> tuple[list, list[int]]:
        await app.start()
        llm = app.runtime.instances["llm"][0].handle
        llm.record_iterations = True
        finished: list[int] = []
        t0 = asyncio.get_running_loop().time()

        async def one(i: int) -> None:
            await asyncio.sleep(max(0.0, t0 + arrivals[i] - asyncio.get_running_loop().time()))
            await app.run(queries[i])
            finished.append(i)

        try:
            await asyncio.gather(*(one(i) for i in range(4)))
        finally:
            await app.stop()
        return [(p, d) for _, p, d, _ in llm.iterations], finished

    return run_virtual(main()) if virtual else asyncio.run(main())


@pytest.mark.wall_clock
def test_virtual_and_wall_clock_give_the_same_schedule():
    virtual, wall = schedule(True), schedule(False)
    assert virtual[1] == wall[1]
    assert virtual[0] == wall[0] and len(virtual[0]) > 5


@pytest.mark.timeout(60)
@pytest.mark.parametrize("policy", ["to", "fifo", "po"])
def test_waiting_policies_make_progress_on_the_virtual_clock(policy):
    # a batch that waits for a fuller batch until a deadline must be released at that deadline: a
    # timer set with rounding just before it would re-arm at the same virtual instant forever
    report = simulate(
        naive_rag.build(), PROFILE, rate=3.0, queries=query_variants(QUERY, 6), config={"policy": policy}
    )
    assert report.failed == 0 and len(report.latencies) == 6


def test_every_simulated_llm_setting_in_a_profile_reaches_the_engine():
    entry = {
        "cost": {"base": 0.1},
        "max_num_seqs": 3,
        "num_blocks": 99,
        "block_size": 8,
        "token_ratio": 1.5,
        "scheduling": "priority",
        "preemption": "swap",
        "swap_seconds_per_block": 0.5,
        "abort_kv": "swap",
    }
    llm = simulated_engine("llm", "vllm", {**PROFILE, "engines": {"vllm": entry}})
    assert (llm.max_num_seqs, llm.pool.num_blocks, llm.pool.block_size, llm.token_ratio) == (3, 99, 8, 1.5)
    assert (llm.scheduling, llm.preemption, llm.swap_seconds_per_block, llm.abort_kv) == (
        "priority",
        "swap",
        0.5,
        "swap",
    )
