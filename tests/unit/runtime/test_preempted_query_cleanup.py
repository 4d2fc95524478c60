"""A graph query whose decode is preempted and resumed: its dispatch starts twice but gets one
result, so the query's in-flight count must come back to 0 (`DispatchWork.requeued`), and a query
that fails meanwhile runs its clean-up (QueryRun.maybe_cleanup waits for in-flight work).

The query (one LLM component: a prefill fused into its decode, 10 tokens) runs on a runtime's
scheduler through a QueryContext whose clean-up is recorded. On the virtual clock with a
StepDecoder of 1-second steps holding 1 request: token k of the query's decode is out at t = k + 1
while it runs; at t=5 it has decoded 5 tokens (past mlfq's 4-token quantum: demoted); an urgent
3-token call of another program comes at 5.5 and preempts it (the abort lands at t=6); the urgent
call runs t=6..9; the query's decode resumes at 9 and ends at 14."""

from __future__ import annotations

import asyncio

import pytest

from engines.sim.step_decoder import StepDecoder
from teola import App, Engine, Node
from teola.runtime import QueryCancelled, Runtime
from teola.runtime.graph_tier.graph_scheduler import QueryRun
from teola.runtime.graph_tier.query_context import QueryContext
from teola.sim.virtual_loop import run_virtual
from tests.support.entry_work import decoding_entry


def compiled_query():
    app = App("one")
    app.register_engine(Engine("llm", kind="vllm", model="m"), backend=StepDecoder("llm"))
    gen = Node(
        "llm", name="gen", engine="llm", config={"parts": [["q", "$query.question"]], "max_tokens": 10}
    )
    app.update_template([gen])
    return app.compile({"question": "write a lot"})


def run_query(fail_at: float | None):
    """Run the query; with `fail_at`, cancel it then. Returns the run, its outcome, the clean-ups
    asked for (loop times) and the runtime's metrics."""

    async def main():
        engine = StepDecoder("llm", step=1.0, max_batch=1, max_efficient_batch=1)
        rt = Runtime(
            {"llm": Engine("llm", kind="vllm", model="m", max_efficient_batch=1)},
            {"llm": engine},
            policy="mlfq",
            policy_options={"mlfq": {"base_quantum": 4, "beta": None, "rerank_every": 1}},
        )
        await rt.start()
        loop = asyncio.get_running_loop()
        cleanups: list[float] = []

        def ended(run, err, latency):  # as the runtime does: an ended query's work stops on the engines
            if err is not None:
                rt.schedulers["llm"].abort(run.qid)
            rt.end_program(run.qid)

        ctx = QueryContext(
            submit=lambda eng, e: rt.schedulers[eng].submit(e),
            withdraw=lambda eng, e: rt.schedulers[eng].remove(e),
            llm_engines=frozenset({"llm"}),
            metrics=rt.metrics,
            prescheduling=True,
            ended=ended,
            cleanup=lambda run: cleanups.append(loop.time()),
        )
        compiled = compiled_query()
        run = QueryRun(ctx, compiled, {}, rt.plans.get(compiled.egraph))
        run.needs_cleanup = True  # as a query that ingested documents into a namespace of its own
        try:
            run.start(None)
            await asyncio.sleep(5.5)
            urgent, urgent_work = decoding_entry(
                "urgent", [{"parts": [["question", "one line"]], "max_tokens": 3}], 5.5
            )
            rt.schedulers["llm"].submit(urgent)
            if fail_at is not None:
                await asyncio.sleep(fail_at - 5.5)
                run.fail(QueryCancelled(f"query {run.qid} was cancelled", run.qid))
            try:
                outcome = await run.future
            except QueryCancelled as exc:
                outcome = exc
            await urgent_work.done.wait()
            await asyncio.sleep(10)  # whatever still runs for it lands
        finally:
            await rt.stop()
        return run, outcome, cleanups, rt.metrics

    return run_virtual(main())


def test_a_query_whose_decode_was_preempted_and_resumed_ends_with_nothing_in_flight():
    run, result, cleanups, metrics = run_query(fail_at=None)
    assert result.output == "".join(f"t{k} " for k in range(10))
    assert metrics.preemptions == 1
    decode = {t["primitive"]: t for t in result.trace}["gen.call.decode"]
    assert decode["batches"] == 2 and decode["finished"] == 14.0
    assert run.inflight == 0
    assert cleanups == []  # it succeeded: nothing to clean up


@pytest.mark.parametrize(
    "fail_at, cleaned_at",
    [
        (7.5, 7.5),  # while its preempted decode waits in the queue: nothing of it is on the engine
        (10.5, 11.0),  # while its decode runs again: once the abort lands at the decode's next step
    ],
)
def test_a_failing_query_whose_decode_was_preempted_runs_its_cleanup(fail_at, cleaned_at):
    run, outcome, cleanups, metrics = run_query(fail_at)
    assert isinstance(outcome, QueryCancelled) and metrics.preemptions == 1
    assert run.inflight == 0 and run.cleaned
    assert cleanups == [cleaned_at]
