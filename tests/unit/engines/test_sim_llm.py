"""The simulated LLM engine (engines.sim.llm) against hand-computed cases: iteration times of the
linear cost model, chunked prefill under the token budget, prefix-cache hits, preemption by
recompute and by swap when KV blocks run out, priority scheduling, abort, streamed items, and
deterministic output lengths. All in virtual time."""

from __future__ import annotations

import asyncio

import pytest

from engines.sim.llm import SimLLM
from engines.stream_events import KVReport
from teola.sim.virtual_loop import run_virtual

COST = {"base": 1.0, "prefill_token": 0.01, "decode_seq": 0.1, "context_token": 0.0}


def req(words: int, max_tokens: int, word: str = "a", **kw) -> dict:
    """A prompt of words + 3 generation-prompt tokens (token_ratio 1, no template tokens)."""
    return {
        "parts": [["question", " ".join([word] * words)]],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        **kw,
    }


def engine(**kw) -> SimLLM:
    return SimLLM("llm", kw.pop("cost", COST), token_ratio=1.0, template_tokens=0, **kw)


def run(main):
    async def wrapped():
        return await main()

    return run_virtual(wrapped())


def test_one_call_takes_a_prefill_iteration_then_one_iteration_per_token():
    async def main():
        e = engine()
        await e.start()
        [r] = await e.execute("decoding", [req(37, 5)])
        t = asyncio.get_running_loop().time()
        await e.stop()
        return r, t, e.stats

    r, t, stats = run(main)
    # prefill 40 tokens samples token 1: 1 + 0.4; tokens 2..5: 4 x (1 + 0.1)
    assert t == pytest.approx(1.4 + 4 * 1.1)
    assert r["num_prompt_tokens"] == 40 and r["num_output_tokens"] == 5 and stats["iterations"] == 5
    assert r["text"].startswith("answer ") and len(r["output_token_ids"]) == 5


def test_a_long_prompt_is_prefilled_in_chunks_of_the_token_budget():
    async def main():
        e = engine(max_num_batched_tokens=16)
        e.record_iterations = True
        await e.start()
        await e.execute("prefilling", [req(37, 1)])
        await e.stop()
        return e.iterations

    its = run(main)
    assert [p for _, p, _, _ in its] == [16, 16, 8]
    assert sum(s for s, *_ in its) == pytest.approx(3 * 1.0 + 0.4)


def test_a_repeated_prompt_hits_the_prefix_cache():
    async def main():
        e = engine(block_size=16)
        await e.start()
        await e.execute("prefilling", [req(37, 1)])
        t = asyncio.get_running_loop().time()
        [r] = await e.execute("decoding", [req(37, 2)])
        return r, asyncio.get_running_loop().time() - t

    r, took = run(main)
    assert r["num_cached_tokens"] == 32  # 2 full blocks of 16; the last token is always computed
    assert took == pytest.approx((1 + 0.08) + 1.1)


def test_running_out_of_blocks_preempts_the_last_admitted_call_which_recomputes():
    async def main():
        e = engine(num_blocks=6, block_size=4)
        await e.start()
        out = await e.execute("decoding", [req(9, 8), req(9, 8, word="b")])  # 12 prompt tokens each
        await e.stop()
        return out, e.stats

    out, stats = run(main)
    # each call needs 5 blocks at its end (12 + 8 tokens / 4); 6 blocks cannot hold both
    assert stats["preemptions"] >= 1 and stats["recomputed_tokens"] > 0
    for r in out:
        assert r["num_output_tokens"] == 8 and r["output_token_ids"] == out[0]["output_token_ids"]


def test_swap_keeps_the_computed_tokens_and_charges_the_swap_time():
    async def main():
        e = engine(num_blocks=6, block_size=4, preemption="swap", swap_seconds_per_block=0.5)
        await e.start()
        out = await e.execute("decoding", [req(9, 8), req(9, 8, word="b")])
        await e.stop()
        return out, e.stats

    out, stats = run(main)
    assert stats["preemptions"] >= 1 and stats["swapped_blocks"] > 0 and stats["recomputed_tokens"] == 0
    assert all(r["num_output_tokens"] == 8 for r in out)


def test_priority_scheduling_takes_the_better_waiting_call_first():
    async def main():
        e = engine(max_num_seqs=1, scheduling="priority")
        await e.start()
        done: list[str] = []

        async def call(name: str, priority: int) -> None:
            await e.execute("decoding", [req(5, 3, priority=priority, tag=name)])
            done.append(name)

        first = asyncio.ensure_future(call("running", 5))
        await asyncio.sleep(0)
        await asyncio.gather(first, call("low", 9), call("high", 1))
        return done

    assert run(main) == ["running", "high", "low"]


def test_a_waiting_call_of_better_priority_preempts_a_running_one_when_blocks_run_out():
    async def main():
        e = engine(num_blocks=4, block_size=4, scheduling="priority")
        await e.start()
        done: list[str] = []

        async def call(name: str, priority: int, n: int) -> None:
            await e.execute("decoding", [req(9, n, word=name, priority=priority)])
            done.append(name)

        low = asyncio.ensure_future(call("low", 9, 4))
        await asyncio.sleep(1.5)  # low is decoding and holds 4 blocks
        await asyncio.gather(low, call("high", 0, 2))
        return done, e.stats["preemptions"]

    done, preemptions = run(main)
    assert done == ["high", "low"] and preemptions == 1


def test_abort_stops_a_call_and_returns_what_it_decoded():
    async def main():
        e = engine()
        await e.start()
        task = asyncio.ensure_future(e.execute("decoding", [req(5, 100, owner="q1")]))
        await asyncio.sleep(1.08 + 3 * 1.1 + 0.01)  # prefill of 8 tokens + 3 decode iterations
        n = await e.abort(["q1"])
        [r] = await task
        return n, r

    n, r = run(main)
    assert n == 1 and r["aborted"] and r["num_output_tokens"] == 4


def test_a_split_output_streams_its_items_while_decoding():
    async def main():
        e = engine()
        await e.start()
        events = []
        async for _i, kind, value in e.stream("decoding", [req(5, 12, split="list")]):
            events.append((asyncio.get_running_loop().time(), kind, value))
        return events

    events = run(main)
    items = [(t, v.text) for t, k, v in events if k == "item"]
    final = [v for _, k, v in events if k == "final"][0]
    assert len(items) == 3 and [v for _, v in items] == final["items"]
    assert items[0][0] < items[-1][0]  # the first item came out before decoding ended


def test_sampled_lengths_are_deterministic_and_capped_by_max_tokens():
    async def main(seed: int):
        e = engine(lengths={"text": [3, 7, 11]}, seed=seed)
        await e.start()
        out = await e.execute(
            "decoding", [{"parts": [["q", f"question {i}"]], "max_tokens": 10} for i in range(12)]
        )
        return [r["num_output_tokens"] for r in out]

    a, b = run_virtual(main(0)), run_virtual(main(0))
    assert a == b and set(a) <= {3, 7, 10} and len(set(a)) > 1


def test_bad_requests_and_settings_name_the_problem():
    with pytest.raises(ValueError, match="scheduling"):
        SimLLM("llm", scheduling="lifo")

    async def main():
        e = engine(max_model_len=20)
        await e.start()
        with pytest.raises(ValueError, match="max_model_len"):
            await e.execute("decoding", [req(30, 5)])
        with pytest.raises(ValueError, match="not 'embedding'"):
            await e.execute("embedding", [{"text": "x"}])

    run(main)


@pytest.mark.parametrize("abort_kv", ["drop", "swap"])
def test_a_preempted_call_resumes_by_recompute_or_by_swapping_its_kv_back(abort_kv):
    async def main():
        e = engine(abort_kv=abort_kv, swap_seconds_per_block=0.25, block_size=4)
        await e.start()
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(e.execute("decoding", [req(37, 10, tag="call0")]))
        await asyncio.sleep(1.4 + 3 * 1.1 + 0.01)  # prefill (40 tokens) + 3 decode iterations
        await e.abort(["call0"])
        [partial] = await task
        assert e.reset_prefix_cache() > 0  # empty the prefix cache: only a swap can help
        await asyncio.sleep(1.2)  # the iteration in flight at the abort ends
        t = loop.time()
        [rest] = await e.execute("decoding", [req(37, 10 - 4, resume_ids=partial["output_token_ids"])])
        return partial, rest, loop.time() - t, e.stats

    partial, rest, took, stats = run(main)
    assert partial["aborted"] and partial["num_output_tokens"] == 4
    assert (
        rest["num_output_tokens"] == 6 and rest["output_token_ids"][0] == partial["output_token_ids"][-1] + 1
    )
    if abort_kv == "swap":
        # 43 computed tokens = 11 blocks: swapped out (paid by the next iteration) and back in, then the
        # last token computed (1 + 0.01) and 5 decode iterations; nothing prefilled again
        assert stats["swapped_in_tokens"] == 43 and took == pytest.approx(2 * 11 * 0.25 + 1.01 + 5 * 1.1)
    else:  # the 44 tokens (prompt + 4 decoded) are prefilled again, then 5 more decode iterations
        assert stats["swapped_in_tokens"] == 0 and took == pytest.approx(1.44 + 5 * 1.1)


def test_a_resumed_call_loads_from_host_only_what_the_prefix_cache_no_longer_holds():
    """As vLLM asks its KV connector only for tokens past the local prefix-cache hit, a swapped
    call whose blocks are all still cached resumes without loading anything from host memory."""

    async def main():
        e = engine(abort_kv="swap", swap_seconds_per_block=0.25, block_size=4)
        await e.start()
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(e.execute("decoding", [req(37, 10, tag="call0")]))
        await asyncio.sleep(1.4 + 3 * 1.1 + 0.01)
        await e.abort(["call0"])
        [partial] = await task
        await asyncio.sleep(1.2)  # the iteration in flight at the abort ends
        t = loop.time()
        [rest] = await e.execute("decoding", [req(37, 10 - 4, resume_ids=partial["output_token_ids"])])
        return rest, loop.time() - t, e.stats

    rest, took, stats = run(main)
    assert rest["num_output_tokens"] == 6
    # 43 computed tokens: 10 full blocks cached, the last 3 tokens load from host (1 block, 0.25 s),
    # after the swap-out of all 11 blocks that the next iteration pays (2.75 s)
    assert stats["swapped_in_tokens"] == 3
    assert took == pytest.approx(11 * 0.25 + 0.25 + 1.01 + 5 * 1.1)


def test_auto_swaps_until_resumed_calls_show_the_prefix_cache_keeps_their_blocks():
    """abort_kv="auto": with no resume seen, a round trip (2 x 11 blocks x 0.01 s) is cheaper than
    prefilling 43 tokens again (0.43 s), so the first aborted call is swapped. It resumes with all
    10 of its full blocks still cached (survival 1.0), so the next abort keeps nothing on the host:
    only the swap-out would be paid, for nothing."""

    async def main():
        e = engine(abort_kv="auto", swap_seconds_per_block=0.01, block_size=4)
        await e.start()
        task = asyncio.ensure_future(e.execute("decoding", [req(37, 10, tag="call0")]))
        await asyncio.sleep(1.4 + 3 * 1.1 + 0.01)
        await e.abort(["call0"])
        [partial] = await task
        swapped = e.stats["swapped_blocks"]
        await asyncio.sleep(1.2)
        task = asyncio.ensure_future(
            e.execute("decoding", [req(37, 10 - 4, tag="call1", resume_ids=partial["output_token_ids"])])
        )
        await asyncio.sleep(3.0)
        await e.abort(["call1"])
        [again] = await task
        return swapped, again, e.stats

    swapped, again, stats = run(main)
    assert swapped == 11 and stats["swapped_in_tokens"] == 3
    assert stats["resumed_blocks"] == 10 and stats["resumed_cached_blocks"] == 10
    assert again["aborted"] and again["num_output_tokens"] >= 1
    assert stats["swapped_blocks"] == 11 and stats["swaps_declined"] == 1


def test_abort_kv_names_its_choices():
    with pytest.raises(ValueError, match="'drop', 'swap' or 'auto'"):
        engine(abort_kv="keep")


def test_a_partial_prefill_the_engine_would_not_cache_or_already_has_returns_at_once():
    async def main():
        e = engine(block_size=16)
        await e.start()
        loop = asyncio.get_running_loop()
        short = {"parts": [["question", "a " * 5]], "complete": False}
        long = {"parts": [["question", "b " * 40]], "complete": False}
        out = []
        for r in (short, long, long):
            t = loop.time()
            [res] = await e.execute("partial_prefilling", [r])
            out.append((res.get("skipped"), loop.time() - t))
        e.reset_prefix_cache()
        [again] = await e.execute("partial_prefilling", [long])
        off = engine(block_size=16, skip_known_prefixes=False)
        await off.start()
        [unskipped] = await off.execute("partial_prefilling", [short])
        return out, again, unskipped, e.stats["iterations"]

    out, again, unskipped, iterations = run(main)
    assert out[0] == ("shorter than one KV block", 0.0)
    assert out[1][0] is None and out[1][1] > 0
    assert out[2] == ("prefix sent before", 0.0)
    assert "skipped" not in again and "skipped" not in unskipped  # after a reset it is sent again
    assert iterations == 2  # the long prefix, twice; the short one never ran


def test_resize_prompt_cuts_or_pads_just_before_the_assistant_turn():
    from engines.sim.text import PAD_ID, resize_prompt

    assert resize_prompt([1, 2, 3, 4, 8, 9], 4, tail=2) == [1, 2, 8, 9]
    assert resize_prompt([1, 2, 9], 5, tail=1) == [1, 2, PAD_ID, PAD_ID, 9]
    assert resize_prompt([1, 2, 3], 2) == [1, 2]
    assert resize_prompt([1, 2, 3], 3, tail=1) == [1, 2, 3]


def test_a_replayed_prompt_length_is_the_calls_and_keeps_its_cached_start():
    """A sampler that replays recorded calls may give a decoding call its recorded prompt length: the
    engine cuts or pads the prompt to it before the assistant turn, so the start still hits the cache."""

    class Replay:
        def __init__(self):
            self.left = [24, 60]

        def prompt_tokens(self, kind, key):
            return self.left.pop(0)

        def sample(self, kind, key, max_tokens):
            return max_tokens

    async def main():
        e = engine(block_size=16)
        await e.start()
        await e.execute("prefilling", [req(37, 1)])  # 40 tokens: 2 full blocks cached
        e.sampler = Replay()
        short = (await e.execute("decoding", [req(37, 2)]))[0]
        long = (await e.execute("decoding", [req(37, 2)]))[0]
        return short, long

    short, long = run(main)
    assert (short["num_prompt_tokens"], short["num_cached_tokens"]) == (24, 16)
    assert (long["num_prompt_tokens"], long["num_cached_tokens"]) == (60, 32)


def test_priority_scheduling_keeps_arrival_order_when_no_priority_was_given():
    """issue 73: the engine reorders only by the priorities it is given; requests sent without one
    (teola's FCFS policy sends none) run in arrival order."""

    async def main():
        e = engine(max_num_seqs=1, scheduling="priority")
        await e.start()
        done: list[str] = []

        async def call(name: str) -> None:
            await e.execute("decoding", [req(5, 3, tag=name)])
            done.append(name)

        first = asyncio.ensure_future(call("running"))
        await asyncio.sleep(0)
        await asyncio.gather(first, call("second"), call("third"), call("fourth"))
        return done

    assert run(main) == ["running", "second", "third", "fourth"]


def test_a_decode_with_progress_reports_the_engines_own_kv_numbers():
    """issue 73: a 40-token prompt (37 words + 3) decoding 20 tokens in 16-token blocks, 50 blocks in
    all: a StreamEvent.KV at its first token (40 prompt tokens in ceil(40 / 16) = 3 blocks) and when
    its next token starts a new block (40 + 9 = 49 tokens: 3 blocks full, the 4th taken next step),
    each before that token's progress event (which carries the request's executor seconds so far);
    none without "progress"."""

    async def main(progress: bool):
        e = engine(num_blocks=50, block_size=16)
        await e.start()
        events = [
            (kind, value) async for _i, kind, value in e.stream("decoding", [req(37, 20, progress=progress)])
        ]
        await e.stop()
        return events

    events = run(lambda: main(True))
    kv = [(i, v) for i, (k, v) in enumerate(events) if k == "kv"]
    assert [v for _, v in kv] == [
        KVReport(prompt_tokens=40, block_size=16, used_blocks=3, total_blocks=50)
    ] * 2
    progress = [events[i + 1] for i, _ in kv]
    assert [k for k, _ in progress] == ["progress"] * 2
    # with its executor seconds: the prefill step 1 + 40 x 0.01 = 1.4 s, then 1 + 0.1 s per token
    assert [(p.tokens, p.executor_s) for _, p in progress] == [
        (1, pytest.approx(1.4)),
        (9, pytest.approx(1.4 + 8 * 1.1)),
    ]
    assert not [k for k, _ in run(lambda: main(False)) if k == "kv"]
