"""A preempted call's decoded tokens are charged to its program once: as they stream (`progress`,
run by run) or, for those no progress event reported before an abort, when the call ends
(`observe` with the result of all its runs joined), never both."""

from __future__ import annotations

import asyncio

from engines.sim.step_decoder import StepDecoder
from teola.ir.engine_spec import Engine
from teola.runtime import Runtime
from teola.scheduling.base import Limits, Pending
from teola.scheduling.registry import make_policy
from teola.sim.virtual_loop import run_virtual
from tests.support.entry_work import decoding_entry

LIMITS = Limits(max_batch=1, max_efficient_batch=1)


def test_observe_charges_only_what_no_progress_event_charged_over_all_runs():
    """Run 1 reports 3 then 4 tokens and is aborted with 5 out (the 5th never reported); run 2
    reports 2 and ends with 5 more: 10 tokens joined. Charged: 4 while run 1 streamed, 2 while
    run 2 streamed, 10 - 4 - 2 = 4 at the end; the program's service is 10 (charging run 1's
    streamed tokens again at the end would make it 14)."""
    policy = make_policy("plas", beta=None, base_quantum=100, service="tokens")
    e = Pending(
        query_id="prog",
        name="prog.decoding",
        op="decoding",
        depth=0,
        arrival=0.0,
        requests=[{"parts": [["q", "x"]], "max_tokens": 10}],
    )
    first = policy.schedule([e], 0.0, LIMITS).picks[0]
    e.taken = 1
    policy.progress(e, 3, 3.0)
    policy.progress(e, 4, 4.0)
    state = policy.core.calls[e]
    assert state.service == 4
    policy.preempted(first)  # the preemptor put the call back: resumed as prompt + 5 ids, 5 tokens to go
    e.taken = 0
    e.records[0].resume_ids, e.records[0].max_tokens = (0, 1, 2, 3, 4), 5  # the resume is the record's
    second = policy.schedule([e], 9.0, LIMITS).picks[0]
    e.taken = 1
    policy.progress(e, 2, 2.0)
    assert state.service == 6
    policy.observe([second], 9.0, 14.0, [{"num_output_tokens": 10}])
    assert policy.table.get("prog").service == 10


def test_a_preempted_call_run_on_an_engine_is_charged_its_output_once():
    """The engine-level check (StepDecoder of 1-second steps holding 1 request, plas with a
    4-token quantum): bulk (10 tokens) is preempted by urgent (3 tokens, at t=5.5; the abort lands
    at t=6 with 5 tokens out) and resumes at 9; when it ends its program's service is its 10
    tokens, urgent's its 3."""

    async def main():
        engine = StepDecoder("llm", step=1.0, max_batch=1, max_efficient_batch=1)
        rt = Runtime(
            {"llm": Engine("llm", kind="vllm", model="m", max_efficient_batch=1)},
            {"llm": engine},
            policy="plas",
            policy_options={
                "plas": {"base_quantum": 4, "beta": None, "rerank_every": 1, "service": "tokens"}
            },
        )
        await rt.start()
        try:
            sched = rt.schedulers["llm"]
            bulk, bulk_work = decoding_entry(
                "bulk", [{"parts": [["question", "write a lot"]], "max_tokens": 10}], 0.0
            )
            sched.submit(bulk)
            await asyncio.sleep(5.5)
            urgent, urgent_work = decoding_entry(
                "urgent", [{"parts": [["question", "one"]], "max_tokens": 3}], 5.5
            )
            sched.submit(urgent)
            await asyncio.gather(bulk_work.done.wait(), urgent_work.done.wait())
            table = sched.policy.table
            return rt, bulk_work, table.get("bulk").service, table.get("urgent").service
        finally:
            await rt.stop()

    rt, bulk, bulk_service, urgent_service = run_virtual(main())
    assert rt.metrics.preemptions == 1 and bulk.out[0]["preemptions"] == 1 and bulk.done_at == 14.0
    assert bulk_service == 10 and urgent_service == 3
