"""Swap vs recompute on hand-computed costs, and the connector's host index (saves by cost, LRU
drops under the byte bound, loads past the prefix cache's hit), without vLLM."""

from __future__ import annotations

import pytest

from engines.kvswap.choice import (
    SurvivalTracker,
    SwapCosts,
    choose,
    recompute_seconds,
    save_pays,
    swap_seconds,
)
from engines.kvswap.index import SwapIndex

# 1 ms per prefilled token; 1 MB/ms bandwidth; 0.5 ms per copy call
COSTS = SwapCosts(prefill_s_per_token=1e-3, swap_bytes_per_s=1e9, swap_fixed_s=5e-4)


def test_costs_by_hand():
    assert recompute_seconds(100, COSTS) == pytest.approx(0.1)
    assert swap_seconds(1_000_000, COSTS) == pytest.approx(0.0015)  # 0.5 ms + 1 ms
    assert swap_seconds(1_000_000, COSTS, moves=2) == pytest.approx(0.003)  # out and in


@pytest.mark.parametrize(
    "tokens, nbytes, moves, want",
    [
        (100, 1_000_000, 1, "swap"),  # 1.5 ms < 100 ms
        (1, 1_000_000, 1, "recompute"),  # 1.5 ms > 1 ms
        (2, 1_000_000, 1, "swap"),  # 1.5 ms < 2 ms
        (3, 2_000_000, 2, "recompute"),  # 2 x 2.5 ms = 5 ms > 3 ms
        (6, 2_000_000, 2, "swap"),  # 5 ms < 6 ms
        (0, 1_000, 1, "recompute"),  # nothing to recompute
        (10, 0, 1, "recompute"),  # nothing to move
    ],
)
def test_choice_on_hand_computed_costs(tokens, nbytes, moves, want):
    assert choose(tokens, nbytes, COSTS, moves) == want


def test_a_tie_recomputes():
    costs = SwapCosts(prefill_s_per_token=1e-3, swap_bytes_per_s=1e6, swap_fixed_s=0.0)
    assert choose(5, 5_000, costs) == "recompute"  # 5 ms either way
    assert choose(5, 4_999, costs) == "swap"


@pytest.mark.parametrize(
    "bad",
    [
        {"prefill_s_per_token": -1, "swap_bytes_per_s": 1},
        {"prefill_s_per_token": 1, "swap_bytes_per_s": 0},
        {"prefill_s_per_token": float("nan"), "swap_bytes_per_s": 1},
        {"swap_bytes_per_s": 1},
        "fast",
    ],
)
def test_bad_costs_are_named(bad):
    with pytest.raises(ValueError, match="prefill_s_per_token|swap_bytes_per_s|swap costs"):
        SwapCosts.from_dict(bad)


def index(capacity_blocks: int = 10) -> SwapIndex:
    return SwapIndex(block_size=4, record_bytes=1000, capacity_bytes=capacity_blocks * 1000)


def test_save_keeps_every_computed_block_and_releases_after_the_copy():
    ix = index()
    assert ix.save("k", "r1", list(range(12)), [7, 8, 9], computed=11, costs=COSTS)
    jobs = ix.take_jobs()
    assert jobs.saves == [("k", [7, 8, 9])] and jobs.releases == ["r1"]  # 11 tokens: 2 full blocks + 3 tokens
    assert ix.used_bytes == 3000 and jobs.counters["saved_tokens"] == 11 and ix.take_jobs().empty()
    assert ix.entries["k"].tokens == list(range(11))


def test_save_declined_when_recompute_is_cheaper():
    slow_copy = SwapCosts(prefill_s_per_token=1e-3, swap_bytes_per_s=1e6, swap_fixed_s=0.0)
    ix = index()  # 2 blocks = 8 tokens: recompute 8 ms; out + in of 2000 bytes at 1 MB/s = 4 ms
    assert ix.save("k", "r", list(range(8)), [1, 2], 8, slow_copy)
    ix = SwapIndex(block_size=4, record_bytes=3000, capacity_bytes=10**6)  # 12 ms > 8 ms
    assert not ix.save("k", "r", list(range(8)), [1, 2], 8, slow_copy)
    assert ix.take_jobs().empty() and ix.counters["saves_declined"] == 1


def test_lru_drops_the_oldest_and_too_big_is_not_saved():
    ix = index(capacity_blocks=4)
    assert ix.save("a", "ra", list(range(8)), [1, 2], 8, COSTS)
    ix.take_jobs()
    assert ix.save("b", "rb", list(range(8)), [3, 4], 8, COSTS)
    assert ix.save("c", "rc", list(range(8)), [5, 6], 8, COSTS)  # a (saved) goes
    jobs = ix.take_jobs()
    assert jobs.drops == ["a"] and [k for k, _ in jobs.saves] == ["b", "c"] and list(ix.entries) == ["b", "c"]
    assert not ix.save("d", "rd", list(range(20)), [1, 2, 3, 4, 5], 20, COSTS)  # 5 blocks > 4
    assert ix.counters["saves_too_big"] == 1 and ix.counters["lru_drops"] == 1


def test_an_entry_dropped_before_its_save_ran_is_not_saved_but_still_released():
    ix = index(capacity_blocks=2)
    ix.save("a", "ra", list(range(8)), [1, 2], 8, COSTS)
    ix.save("b", "rb", list(range(8)), [3, 4], 8, COSTS)
    jobs = ix.take_jobs()
    assert jobs.saves == [("b", [3, 4])] and jobs.drops == [] and jobs.releases == ["ra", "rb"]


def test_a_resume_loads_past_the_prefix_cache_hit_and_leaves_one_token():
    ix = index()
    tokens = list(range(16))
    ix.save("k", "r", tokens, [10, 11, 12, 13], 16, COSTS)
    ix.take_jobs()
    resumed = tokens + [99]  # 17 tokens: 4 whole blocks, the 17th computed
    assert ix.matched("k", resumed, local=4, costs=COSTS) == 12
    assert ix.matched("k", tokens, local=0, costs=COSTS) == 15  # 16 tokens: all but the last loaded
    assert ix.matched("k", [5] + resumed[1:], local=0, costs=COSTS) == 0  # different tokens
    assert ix.matched("other", resumed, 0, COSTS) == 0
    ix.consume("k", [20, 21, 22, 23, 24], local=4, loaded=12)
    jobs = ix.take_jobs()
    assert jobs.loads == [("k", [21, 22, 23], 1)] and "k" not in ix.entries
    assert jobs.counters["loaded_tokens"] == 12 and jobs.counters["host_bytes"] == 0


def test_a_partly_filled_last_block_is_loaded_so_only_the_last_token_is_computed():
    ix = index()
    ix.save("k", "r", list(range(10)), [1, 2, 3], 10, COSTS)  # the abort: 10 tokens computed
    ix.take_jobs()
    resumed = list(range(11))  # prompt + decoded ids: the 11th (last sampled) token has no KV yet
    assert ix.matched("k", resumed, local=0, costs=COSTS) == 10
    assert ix.matched("k", resumed, local=8, costs=COSTS) == 2
    assert ix.matched("k", resumed[:6], local=0, costs=COSTS) == 0  # would stop before the entry's last block
    ix.consume("k", [20, 21, 22], local=8, loaded=2)
    assert ix.take_jobs().loads == [("k", [22], 2)]


def test_a_resume_that_loads_nothing_drops_the_entry():
    ix = index()
    ix.save("k", "r", list(range(8)), [1, 2], 8, COSTS)
    ix.take_jobs()
    assert ix.matched("k", list(range(9)), local=8, costs=COSTS) == 0  # the prefix cache has it all
    ix.consume("k", [1, 2, 3], local=8, loaded=0)
    jobs = ix.take_jobs()
    assert jobs.drops == ["k"] and jobs.loads == [] and jobs.counters["unused"] == 1


def test_recompute_chosen_at_resume_when_only_a_little_is_missing():
    costs = SwapCosts(prefill_s_per_token=1e-4, swap_bytes_per_s=1e9, swap_fixed_s=1e-3)
    ix = index()  # out + in of 2 blocks: 2 x 1.002 ms > 8 tokens x 0.1 ms: not saved
    assert not ix.save("k", "r", list(range(8)), [1, 2], 8, costs)
    ix = SwapIndex(block_size=4, record_bytes=1000, capacity_bytes=10**6)
    assert ix.save("k", "r", list(range(100)), list(range(25)), 100, costs)  # 2 ms < 10 ms
    # one block missing: load 1.001 ms > recompute 0.4 ms
    assert ix.matched("k", list(range(101)), local=96, costs=costs) == 0
    assert ix.matched("k", list(range(101)), local=0, costs=costs) == 100


@pytest.mark.parametrize(
    "options, problem",
    [
        ({"kv_swap": "yes"}, "kv_swap must be"),
        ({"kv_swap": True, "kv_swap_bytes": 0}, "kv_swap_bytes"),
        ({"kv_swap": True, "kv_swap_costs": {"prefill": 1}}, "kv_swap_costs"),
        ({"kv_swap": True, "kv_swap_costs": {"swap_bytes_per_s": -1}}, "swap_bytes_per_s"),
        ({"kv_swap_bytes": 10}, "need kv_swap: true"),
        ({"kv_swap": True, "engine_args": {"kv_transfer_config": {}}}, "do not pass them"),
    ],
)
def test_vllm_engine_rejects_bad_kv_swap_options(options, problem):
    from engines.vllm.engine import VLLMEngine

    with pytest.raises(ValueError, match=problem):
        VLLMEngine("llm", **options)


@pytest.mark.parametrize(
    "computed, move_s, survival, want",
    [
        # 4-token blocks, 1 s to prefill a token, `move_s` to move one block, no fixed cost
        (8, 1.0, 0.0, True),  # 2 full blocks: out 2 s + in 2 s = 4 s < 8 s lost
        (8, 1.0, 0.5, True),  # out 2 s + in 1 s = 3 s < 4 s lost
        (8, 1.0, 0.75, False),  # out 2 s + in 0.5 s = 2.5 s > 2 s lost
        (8, 1.0, 1.0, False),  # nothing lost: the swap-out would be paid for nothing
        (11, 1.0, 1.0, False),  # the 3-token tail is lost: out 3 s + in 1 s = 4 s > 3 s
        (11, 0.5, 1.0, True),  # out 1.5 s + in 0.5 s = 2 s < 3 s: the tail alone pays for the save
        (12, 0.5, 1.0, False),  # no tail, every full block cached: nothing lost
        (0, 0.5, 0.0, False),  # nothing computed
    ],
)
def test_a_save_pays_for_what_the_prefix_cache_loses_and_it_never_keeps_the_tail(
    computed, move_s, survival, want
):
    assert save_pays(computed, 4, move_s, 1.0, survival) is want


def test_save_pays_counts_the_fixed_cost_of_both_copies_and_matches_choose_with_nothing_cached():
    assert not save_pays(11, 4, 0.5, 1.0, 1.0, fixed_s=0.6)  # 1.2 s + 2 s = 3.2 s > 3 s
    assert save_pays(11, 4, 0.5, 1.0, 1.0, fixed_s=0.4)  # 0.8 s + 2 s = 2.8 s < 3 s
    for tokens in (3, 6, 8, 40):
        nbytes = -(-tokens // 4) * 1_000_000
        assert save_pays(
            tokens,
            4,
            swap_seconds(1_000_000, COSTS) - COSTS.swap_fixed_s,
            COSTS.prefill_s_per_token,
            0.0,
            COSTS.swap_fixed_s,
        ) is (choose(tokens, nbytes, COSTS, moves=2) == "swap")
    with pytest.raises(ValueError, match="survival"):
        save_pays(8, 4, 1.0, 1.0, 1.5)
    with pytest.raises(ValueError, match="block_size"):
        save_pays(8, 0, 1.0, 1.0)


def test_a_save_weighs_what_resumed_calls_found_still_in_the_prefix_cache():
    """Out + in of 2 blocks (2 x 2000 bytes at 1 MB/s = 4 ms) against recomputing 8 tokens (8 ms):
    saved while nothing is known. Its resume finds both full blocks cached (survival 1.0), so the
    next save would pay a 2 ms swap-out to spare nothing, and is declined; a declined call's resume
    is watched too."""
    slow_copy = SwapCosts(prefill_s_per_token=1e-3, swap_bytes_per_s=1e6, swap_fixed_s=0.0)
    ix = index()
    assert ix.survival() == 0.0
    assert ix.save("k1", "r1", list(range(9)), [1, 2, 3], 8, slow_copy)
    ix.consume("k1", [4, 5, 6], local=8, loaded=0)  # both full blocks were still cached
    assert ix.counters["resumed_blocks"] == 2 and ix.counters["resumed_cached_blocks"] == 2
    assert ix.survival() == 1.0
    assert not ix.save("k2", "r2", list(range(9)), [7, 8, 9], 8, slow_copy)
    assert ix.counters["saves_declined"] == 1
    ix.consume("k2", [1, 2, 3], local=0, loaded=0)  # the declined call resumed with nothing cached
    assert ix.survival() == 0.5
    ix.consume("k2", [1, 2, 3], local=0, loaded=0)  # a later admission of the same key is not a resume
    assert ix.counters["resumed_blocks"] == 4


def test_a_call_with_a_partly_filled_last_block_is_saved_even_when_resumes_keep_every_full_block():
    """Survival 1.0, then an aborted call of 2 full blocks and a 3-token tail: out 3 blocks + in 1
    block (4 x 1 ms at 1 MB/s) against prefilling the 3 tail tokens at 2 ms each (6 ms)."""
    costs = SwapCosts(prefill_s_per_token=2e-3, swap_bytes_per_s=1e6, swap_fixed_s=0.0)
    ix = index()
    assert ix.save("k1", "r1", list(range(9)), [1, 2, 3], 8, costs)
    ix.consume("k1", [4, 5, 6], local=8, loaded=0)
    assert ix.survival() == 1.0
    assert not ix.save("k2", "r2", list(range(9)), [1, 2], 8, costs)  # no tail: nothing lost
    assert ix.save("k3", "r3", list(range(12)), [1, 2, 3], 11, costs)  # the tail is
    assert ix.matched("k3", list(range(12)), 8, costs) == 3  # ... and loads back


def test_survival_tracker_counts_a_watched_calls_first_resume_and_forgets_the_oldest():
    t = SurvivalTracker(limit=2)
    assert t.share() == 0.0
    t.watch("a", 4)
    t.watch("b", 0)  # nothing computed: not watched
    assert t.resumed("b", 3) == (0, 0)
    assert t.resumed("a", 9) == (4, 4)  # cached is capped at the call's own blocks
    assert t.resumed("a", 4) == (0, 0)  # only the first admission after the abort counts
    t.watch("c", 2)  # "c" is forgotten past the limit
    t.watch("d", 2)
    t.watch("e", 2)
    assert t.resumed("c", 2) == (0, 0)
    assert t.resumed("d", 1) == (2, 1)
    assert (t.blocks, t.cached, t.share()) == (6, 5, 5 / 6)
    assert t.watching and t.resumed("e", 2) == (2, 2) and not t.watching
    assert t.count(3, 7) == (3, 3) and (t.blocks, t.cached) == (11, 10)
    with pytest.raises(ValueError, match="limit"):
        SurvivalTracker(limit=0)


def test_a_call_cancelled_while_it_runs_is_not_saved_when_its_abort_arrives():
    """issue 62: a call whose client went away never resumes, so its abort saves nothing (no copy,
    no host memory); the mark is consumed by that one abort."""
    ix = index()
    ix.forget(["k"], running=True)
    assert not ix.save("k", "r1", list(range(12)), [7, 8, 9], computed=11, costs=COSTS)
    jobs = ix.take_jobs()
    assert jobs.empty() and ix.used_bytes == 0 and jobs.counters["saves_cancelled"] == 1
    assert ix.save("k", "r2", list(range(12)), [7, 8, 9], computed=11, costs=COSTS)  # mark used up


def test_a_cancelled_waiting_call_drops_what_was_saved_for_it():
    ix = index()
    assert ix.save("k", "r1", list(range(8)), [1, 2], 8, COSTS)
    ix.take_jobs()
    assert ix.save("q", "r2", list(range(8)), [3, 4], 8, COSTS)  # its save not handed out yet
    ix.forget(["k", "q"], running=False)
    jobs = ix.take_jobs()
    assert jobs.drops == ["k"] and jobs.saves == [] and jobs.releases == ["r2"]  # q's blocks still freed
    assert ix.used_bytes == 0 and not ix.cancelled("k")


def test_the_forget_marker_round_trips_and_ordinary_params_are_not_markers():
    from engines.vllm.kv_swap import call_params, forget_params, forgotten

    assert forgotten(forget_params(["a", "b"], running=True)) == (["a", "b"], True)
    assert forgotten(call_params("a", COSTS)["kv_transfer_params"]) is None
    assert forgotten(None) is None and forgotten({"teola_swap": {"forget": "a"}}) is None
