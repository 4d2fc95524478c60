"""The `fcfs` policy (LAMPS' FCFS baseline under admission control) and what the simulated LAMPS
study reads from a call: when it started (CallOutcome.started) and how long it waited in the
engine ("queued_s"); the fast path of the continuation check; the token estimate of a call that
continues after a pause."""

from __future__ import annotations

import asyncio
import enum

import pytest

from engines.llm_text.llm_requests import _token_ids, check_continuation
from engines.sim.llm import SimLLM
from engines.sim.step_decoder import StepDecoder
from teola.ir.engine_spec import Engine
from teola.runtime import Runtime
from teola.scheduling.registry import Limits, RequestQueue, make_policy
from teola.sim.virtual_loop import run_virtual
from tests.unit.scheduling.test_policies import entry, picked


def test_fcfs_takes_calls_in_arrival_order_up_to_the_free_slots():
    q = RequestQueue(
        [
            entry("q1", "late", 0, 2.0, op="decoding"),
            entry("q2", "early", 0, 1.0, op="decoding"),
            entry("q3", "middle", 0, 1.5, op="decoding"),
        ]
    )
    policy = make_policy("fcfs")
    assert policy.preemptive and not policy.wants_progress
    assert picked(policy.schedule(q, 3.0, Limits(max_batch=2, max_efficient_batch=2))) == [
        ("early", 1),
        ("middle", 1),
    ]


def step_runtime(policy: str, batch: int = 8) -> tuple[Runtime, StepDecoder]:
    """A runtime over one deterministic continuous-batching test LLM (10 ms per decode step) that
    holds `batch` calls at once."""
    engine = StepDecoder("llm", step=0.01, max_batch=batch, max_efficient_batch=batch)
    return Runtime(
        {"llm": Engine("llm", kind="vllm", model="m", max_efficient_batch=batch)},
        {"llm": engine},
        policy=policy,
    ), engine


def run_calls(policy: str, lengths: list[int]) -> tuple[list[float], list[float], StepDecoder, list[dict]]:
    """Calls of the given lengths submitted together; when each returned, when each started, the engine
    and the requests it saw."""
    done, started, engine, seen, _ = _run_calls(policy, lengths)
    return done, started, engine, seen


def run_calls_with_bodies(policy: str, lengths: list[int]) -> tuple[list[dict], list[dict]]:
    """`run_calls`' request bodies as they are after the calls ended, and the requests the engine saw."""
    _, _, _, seen, bodies = _run_calls(policy, lengths)
    return bodies, seen


def _run_calls(
    policy: str, lengths: list[int]
) -> tuple[list[float], list[float], StepDecoder, list[dict], list[dict]]:
    bodies = [{"parts": [["user", f"c{i}"]], "max_tokens": n} for i, n in enumerate(lengths)]

    async def main():
        engine = StepDecoder("llm", step=0.01, max_efficient_batch=8)
        seen: list[dict] = []
        real = engine._one

        async def spy(op, i, req, emit):
            seen.append(dict(req))
            return await real(op, i, req, emit)

        engine._one = spy
        rt = Runtime(
            {"llm": Engine("llm", kind="vllm", model="m", max_efficient_batch=8)},
            {"llm": engine},
            policy=policy,
        )
        await rt.start()
        loop = asyncio.get_running_loop()
        sent = loop.time()

        async def call(i: int, n: int):
            out = await rt.submit_call("llm", bodies[i], program=f"p{i}", call_id=f"c{i}", parents=[])
            return loop.time() - sent, out.started - sent

        try:
            res = await asyncio.gather(*(call(i, n) for i, n in enumerate(lengths)))
        finally:
            await rt.stop()
        return [r[0] for r in res], [r[1] for r in res], engine, seen, bodies

    return run_virtual(main())


def test_fcfs_calls_return_when_they_finish_not_with_their_batch():
    done, started, engine, seen = run_calls("fcfs", [2, 50])
    assert done[0] == pytest.approx(0.02, abs=0.01) and done[1] == pytest.approx(0.5, abs=0.02)
    assert started == [0.0, 0.0]
    assert not any(r.get("progress") for r in seen)  # lamps / sjf / fcfs never charge running calls


def test_fifo_batches_return_together_and_program_policies_still_get_progress():
    done, _, _, _ = run_calls("fifo", [2, 50])
    assert done[0] == pytest.approx(done[1])  # the short call waited for the long one it was batched with
    _, _, _, seen = run_calls("atlas", [2, 50])
    assert all(r.get("progress") for r in seen)


def test_topology_batches_on_a_continuous_engine_hand_each_call_back_when_it_ends():
    # one batch (topology-aware batching puts both calls in it), but the short call does not wait for
    # the long one: the engine batches continuously, so batching decides what runs together, not who waits
    done, started, engine, _ = run_calls("topology", [2, 50])
    assert started == [0.0, 0.0] and engine.peak == 2
    assert done[0] == pytest.approx(0.02, abs=0.01) and done[1] == pytest.approx(0.5, abs=0.02)


def test_streamed_calls_in_a_topology_batch_also_come_back_as_each_ends():
    async def main():
        rt, engine = step_runtime("topology")
        await rt.start()
        loop = asyncio.get_running_loop()
        sent, texts = loop.time(), {0: [], 1: []}

        async def call(i: int, n: int):
            out = await rt.submit_call(
                "llm",
                {"parts": [["user", f"c{i}"]], "max_tokens": n, "stream_text": True},
                program=f"p{i}",
                call_id=f"c{i}",
                parents=[],
                on_delta=texts[i].append,
            )
            return loop.time() - sent, out

        try:
            res = await asyncio.gather(call(0, 2), call(1, 50))
        finally:
            await rt.stop()
        return res, texts, engine

    ((t0, a), (t1, b)), texts, engine = run_virtual(main())
    assert engine.peak == 2  # one batch
    assert t0 == pytest.approx(0.02, abs=0.01) and t1 == pytest.approx(0.5, abs=0.02)
    assert "".join(texts[0]) == a.result["text"] and "".join(texts[1]) == b.result["text"]


def good_and_bad(patch) -> tuple:
    """Calls "good" and "bad" sent together under topology batching, after `patch(engine)` made the
    step decoder misbehave on "bad"; their outcomes (a result or the exception)."""

    async def main():
        rt, engine = step_runtime("topology")
        patch(engine)
        await rt.start()
        try:
            return await asyncio.gather(
                *(
                    rt.submit_call(
                        "llm",
                        {"parts": [["user", text]], "max_tokens": 5},
                        program=text,
                        call_id=text,
                        parents=[],
                    )
                    for text in ("good", "bad")
                ),
                return_exceptions=True,
            )
        finally:
            await rt.stop()

    return run_virtual(main())


def test_a_failing_call_in_a_topology_batch_fails_alone():
    def patch(engine):
        real = engine._one

        async def flaky(op, i, req, emit):
            if "bad" in str(req["parts"]):
                raise ValueError("this prompt breaks the engine")
            return await real(op, i, req, emit)

        engine._one = flaky

    good, bad = good_and_bad(patch)
    assert not isinstance(good, BaseException) and good.result["text"]
    assert isinstance(bad, Exception) and "this prompt breaks the engine" in str(bad)


def test_an_engine_returning_too_few_results_fails_that_call_alone_with_a_clear_error():
    def patch(engine):
        real = engine.execute

        async def short(op, requests):
            res = await real(op, requests)
            return [] if "bad" in str(requests[0]["parts"]) else res

        engine.execute = short

    good, bad = good_and_bad(patch)
    assert not isinstance(good, BaseException) and good.result["text"]
    assert isinstance(bad, Exception) and "engine 'llm' returned 0 results for 1 request" in str(bad)


def test_a_queued_call_reports_when_it_started():
    async def main():
        rt, _ = step_runtime("fcfs", batch=1)
        await rt.start()
        try:
            return await asyncio.gather(
                *(
                    rt.submit_call(
                        "llm",
                        {"parts": [["user", f"c{i}"]], "max_tokens": 10},
                        program=f"p{i}",
                        call_id=f"c{i}",
                        parents=[],
                    )
                    for i in range(2)
                )
            )
        finally:
            await rt.stop()

    a, b = run_virtual(main())
    assert a.started == pytest.approx(0.0) and b.started == pytest.approx(0.1, abs=0.01)


def test_the_sim_engine_reports_how_long_a_request_waited_for_its_first_iteration():
    cost = {"base": 1.0, "prefill_token": 0.0, "decode_seq": 0.0, "context_token": 0.0}

    async def main():
        e = SimLLM("llm", cost, max_num_seqs=1, token_ratio=1.0, template_tokens=0)
        await e.start()
        try:
            return await e.execute(
                "decoding",
                [
                    {"parts": [["q", "a b c"]], "max_tokens": 3, "ignore_eos": True},
                    {"parts": [["q", "d e f"]], "max_tokens": 3, "ignore_eos": True},
                ],
            )
        finally:
            await e.stop()

    a, b = run_virtual(main())
    # one prefill iteration makes the first token, two more decode it: the second waits 3 iterations
    assert a["queued_s"] == 0.0 and b["queued_s"] == pytest.approx(3.0)


class Tok(enum.IntEnum):
    A = 3


@pytest.mark.parametrize(
    "seg, ok",
    [
        ([], True),
        ([0, 5, 7], True),
        ([1, -1], False),
        ([1, True], False),
        ([1, 2.0], False),
        ([Tok.A, 4], True),
        ([Tok.A, -2], False),
    ],
)
def test_token_id_check_fast_path_agrees_with_the_element_by_element_check(seg, ok):
    slow = all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in seg)
    assert _token_ids(seg) == slow == ok
    if ok:
        assert check_continuation("decoding", [seg, "text"]) == [seg, "text"]
    else:
        with pytest.raises(ValueError, match="continuation"):
            check_continuation("decoding", [seg])


def test_a_continuing_call_is_estimated_with_the_context_it_carries():
    from teola.runtime.engine_tier.token_estimates import estimate_prompt_tokens, estimate_tokens

    base = {"parts": [["user", "x" * 40]], "complete": True, "max_tokens": 5}
    assert estimate_prompt_tokens(base) == 11
    cont = {**base, "continuation": [list(range(30)), "y" * 20, [1, 2]]}
    assert estimate_prompt_tokens(cont) == (40 + 20) // 4 + 1 + 32
    assert estimate_tokens(cont) == estimate_prompt_tokens(cont) + 5
