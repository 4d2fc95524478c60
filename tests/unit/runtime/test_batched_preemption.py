"""issue 62: a batched decoding entry (several requests in one engine-scheduler entry) is one
preemptible call. On the virtual clock with a StepDecoder of 1-second steps, so every time below is
exact: the entry runs, is demoted past its quantum (mlfq, 4 tokens summed over its requests), is
preempted by a better entry, and resumes each request from its own output tokens so far."""

from __future__ import annotations

import asyncio

import pytest

from engines.sim.step_decoder import StepDecoder
from teola.ir.engine_spec import Engine
from teola.runtime import Runtime
from teola.scheduling.base import Pending
from teola.sim.virtual_loop import run_virtual
from tests.support.borrowed import Borrowed
from tests.support.entry_work import RecordedWork, decoding_entry


def entry(program: str, prompt: str, max_tokens: list[int], t: float) -> tuple[Pending, RecordedWork]:
    return decoding_entry(
        program,
        [{"parts": [["question", f"{prompt} {i}"]], "max_tokens": n} for i, n in enumerate(max_tokens)],
        t,
    )


def expected(first: int, end: int) -> str:
    return "".join(f"t{k} " for k in range(first, end))


def run(bulk_tokens: list[int], urgent_tokens: list[int], urgent_at: float = 3.5):
    """`bulk` (program "bulk") at t=0, `urgent` at `urgent_at`, on an engine holding 2 requests."""

    async def main():
        lent = Borrowed(StepDecoder("llm", step=1.0, max_batch=2, max_efficient_batch=2))
        await lent.engine.start()
        rt = Runtime(
            {"llm": Engine("llm", kind="vllm", model="m", max_efficient_batch=2)},
            {"llm": lent},
            policy="mlfq",
            policy_options={
                "mlfq": {"base_quantum": 4, "beta": None, "rerank_every": 1, "service": "tokens"}
            },
        )
        await rt.start()
        try:
            sched = rt.schedulers["llm"]
            bulk, bulk_work = entry("bulk", "write a lot", bulk_tokens, 0.0)
            sched.submit(bulk)
            await asyncio.sleep(urgent_at)
            urgent, urgent_work = entry("urgent", "one line", urgent_tokens, urgent_at)
            sched.submit(urgent)
            await asyncio.gather(bulk_work.done.wait(), urgent_work.done.wait())
        finally:
            await rt.stop()
        return rt, lent, bulk_work, urgent_work

    return run_virtual(main())


def test_a_batched_entry_is_preempted_whole_and_each_request_resumes_from_its_own_tokens():
    """bulk: 2 requests x 10 tokens. t=1, 2, 3: 3 tokens each (6 charged > the 4-token quantum:
    demoted to Q1). t=3.5: urgent (2 x 3 tokens, Q0) finds the instance full and preempts bulk; the
    abort lands at bulk's next step, t=4, with 3 tokens out per request. urgent runs t=4..7; bulk
    resumes at 7 as prompt + its 3 ids with max_tokens 7 per request and ends at 14."""
    rt, lent, bulk, urgent = run([10, 10], [3, 3])
    assert urgent.done_at == 7.0 and [r["text"] for r in urgent.out] == [expected(0, 3)] * 2
    assert bulk.done_at == 14.0
    for r in bulk.out:
        assert r["text"] == expected(0, 10) and r["output_token_ids"] == list(range(10))
        assert r["num_output_tokens"] == 10 and r["preemptions"] == 1 and r["resumed_at"] == [3]
        assert "aborted" not in r
    assert bulk.starts == [(0.0, 2), (7.0, 2)] and urgent.starts == [(4.0, 2)]
    assert rt.metrics.preemptions == 1 and lent.engine.aborted == ["llm:call0"]
    runs = [r for r in lent.requests if "write a lot" in str(r["parts"])]
    assert [r.get("resume_ids") for r in runs] == [None, None, [0, 1, 2], [0, 1, 2]]
    assert [r["max_tokens"] for r in runs] == [10, 10, 7, 7]
    # one tag per run of the call, one swap key per request that survives its resume
    assert [r["tag"] for r in runs] == ["llm:call0"] * 2 + ["llm:call2"] * 2
    assert [r["kv_swap_key"] for r in runs] == ["llm:call0.0", "llm:call0.1"] * 2
    assert rt.metrics.resumed_tokens == 2 * (4 + 3)  # the step decoder counts a prompt's words + resumed ids


def test_a_request_that_ended_before_the_preemption_is_not_sent_again():
    """bulk: a 2-token request and a 10-token one. The first ends at t=2 (4 tokens charged: demoted)
    but the call holds both slots until its last request ends; the second is aborted at t=4 with 3
    tokens out. Only it resumes (3 ids, max_tokens 7): in the slot urgent (1 request, t=4..7)
    leaves free, so at t=4 too, ending at 11."""
    rt, lent, bulk, urgent = run([2, 10], [3])
    short, long_ = bulk.out
    assert short["text"] == expected(0, 2) and "preemptions" not in short and "aborted" not in short
    assert long_["text"] == expected(0, 10) and long_["num_output_tokens"] == 3 + 7
    assert long_["preemptions"] == 1 and long_["resumed_at"] == [3]
    assert bulk.done_at == 11.0 and urgent.done_at == 7.0
    assert bulk.starts == [(0.0, 2), (4.0, 1)] and urgent.starts == [(4.0, 1)]
    runs = [r for r in lent.requests if "write a lot" in str(r["parts"])]
    assert len(runs) == 3 and runs[2]["parts"] == runs[1]["parts"]
    assert runs[2]["resume_ids"] == [0, 1, 2] and runs[2]["max_tokens"] == 7


@pytest.mark.parametrize("preempt", [True, False])
def test_without_preemption_the_batched_entry_runs_to_its_end(preempt):
    """The control: with preempt=False the same bulk entry is never stopped (urgent runs beside it,
    vLLM-style) and ends at 10; preempted, it ends at 14 as above."""

    async def main():
        lent = Borrowed(StepDecoder("llm", step=1.0, max_batch=2, max_efficient_batch=2))
        await lent.engine.start()
        rt = Runtime(
            {"llm": Engine("llm", kind="vllm", model="m", max_efficient_batch=2)},
            {"llm": lent},
            policy="mlfq",
            policy_options={
                "mlfq": {
                    "base_quantum": 4,
                    "beta": None,
                    "rerank_every": 1,
                    "service": "tokens",
                    "preempt": preempt,
                }
            },
        )
        await rt.start()
        try:
            bulk, work = entry("bulk", "write a lot", [10, 10], 0.0)
            rt.schedulers["llm"].submit(bulk)
            await asyncio.sleep(3.5)
            urgent, uwork = entry("urgent", "one line", [3, 3], 3.5)
            rt.schedulers["llm"].submit(urgent)
            await asyncio.gather(work.done.wait(), uwork.done.wait())
        finally:
            await rt.stop()
        return rt, work

    rt, work = run_virtual(main())
    assert [r["text"] for r in work.out] == [expected(0, 10)] * 2
    assert rt.metrics.preemptions == (1 if preempt else 0)
    assert work.done_at == (14.0 if preempt else 10.0)


class CancellingDecoder(StepDecoder):
    """A StepDecoder with the vLLM adapter's `cancel(owners, kv_keys)`, recording what it was asked."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.cancelled: list[tuple[list[str], list[str]]] = []

    async def cancel(self, owners: list[str], kv_keys: list[str]) -> int:
        self.cancelled.append((list(owners), list(kv_keys)))
        return await self.abort(owners)


def test_a_withdrawn_batched_call_is_cancelled_with_every_requests_kv_key():
    """Its query no longer needs the running batched call: one cancel stops both requests, naming
    both swap keys, so a kv_swap engine saves neither; nothing is resumed."""

    async def main():
        engine = CancellingDecoder("llm", step=1.0, max_batch=2, max_efficient_batch=2)
        rt = Runtime(
            {"llm": Engine("llm", kind="vllm", model="m")},
            {"llm": engine},
            policy="plas",
            policy_options={"plas": {"beta": None, "service": "tokens"}},
        )
        await rt.start()
        try:
            bulk, work = entry("bulk", "write a lot", [10, 10], 0.0)
            rt.schedulers["llm"].submit(bulk)
            await asyncio.sleep(2.5)
            assert rt.schedulers["llm"].remove(bulk) is False  # running: cancelled in the engine
            await asyncio.sleep(5)
            pre = rt.schedulers["llm"].preemptor
            assert not pre.resumes and not any(pre.calls.values())
        finally:
            await rt.stop()
        return rt, engine, work

    rt, engine, work = run_virtual(main())
    assert engine.cancelled == [(["llm:call0"], ["llm:call0.0", "llm:call0.1"])]
    assert engine.aborted == ["llm:call0"] and engine.finished == []
    assert rt.metrics.aborted_requests == 2 and rt.metrics.preemptions == 0


def test_a_withdrawn_preempted_batched_call_drops_only_the_kv_saved_for_its_preempted_requests():
    from types import SimpleNamespace

    from teola.runtime.engine_tier.preemption import Preemptor, Resume

    asked: list = []

    async def call(inst, method, *args):
        asked.append((inst, method, args))

    from engines.protocol import Capability

    executor = SimpleNamespace(call=call)
    p = Preemptor(SimpleNamespace(executor=executor, spawn=asyncio.run), budget=2)
    i0, i1 = SimpleNamespace(capabilities={Capability.FORGET_KV}), SimpleNamespace(capabilities=frozenset())
    bulk = object()
    p.resumes[bulk] = [
        Resume(request={"kv_swap_key": "llm:call0.0", "max_tokens": 2}, final={"text": "t0 t1 "}),
        Resume(request={"kv_swap_key": "llm:call0.1", "max_tokens": 9}, ids=[0, 1, 2], count=1),
    ]
    p.forget(bulk, [i0, i1])
    assert asked == [(i0, "forget_kv", (["llm:call0.1"],))] and bulk not in p.resumes
