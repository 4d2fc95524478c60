"""`DispatchRecord`, `frozen_body` and `wire_request` (teola.scheduling.dispatch_record):
a body is read-only, the record's set fields win in the request an adapter receives, neither part
is written by the merge, and the two meanings of "tag" live in two fields."""

from __future__ import annotations

import asyncio

import pytest

from teola.scheduling.dispatch_record import DispatchRecord, frozen_body, wire_request


def body() -> dict:
    return {"parts": [["text", "hi"]], "max_tokens": 20, "temperature": 0.0, "stream_text": True}


def test_writing_to_a_frozen_body_raises():
    b = frozen_body(body())
    with pytest.raises(TypeError):
        b["priority"] = 3  # type: ignore[index]
    assert "priority" not in b


def test_a_body_holding_a_record_field_is_refused_by_name():
    with pytest.raises(ValueError, match="pause_kv"):
        frozen_body({**body(), "pause_kv": "swap"})


def test_the_record_is_keyword_only():
    with pytest.raises(TypeError):
        DispatchRecord(1, "q1")  # type: ignore[misc]


def test_the_seam_objects_around_the_record_are_keyword_only():
    from teola.runtime.call_work import CallOutcome
    from teola.runtime.engine_tier.call_resume import Resume
    from teola.runtime.engine_tier.preemption import RunningCall
    from teola.runtime.graph_tier.query_work import DispatchWork
    from teola.scheduling.program.pause_handling import PauseHint

    for cls, args in (
        (CallOutcome, ({}, None)),
        (Resume, ({},)),
        (PauseHint, ("preserve", False)),
        (RunningCall, (None,) * 8),
        (DispatchWork, (None,)),
    ):
        with pytest.raises(TypeError):
            cls(*args)
    assert PauseHint(pause_kv="swap", resumes_preserved=True).pause_kv == "swap"


def test_what_a_policy_reads_and_returns_is_keyword_only():
    from teola.scheduling.base import Decision, Limits, Pending, Pick

    e = Pending(query_id="q", name="n", op="decoding", depth=0, arrival=0.0, requests=[body()])
    for cls, args in ((Limits, (4, 2)), (Pick, (e, 1)), (Decision, ([],))):
        with pytest.raises(TypeError):
            cls(*args)
    decision = Decision(picks=[Pick(entry=e, count=1, priority=3)], wait_until=None)
    assert decision.size == 1 and Limits(max_batch=4, max_efficient_batch=2).token_budget == 0


def test_an_empty_record_sends_the_body_unchanged_in_a_fresh_dict():
    b = frozen_body(body())
    wire = wire_request(b, DispatchRecord())
    assert wire == body() and type(wire) is dict
    wire["priority"] = 1
    assert "priority" not in b


def test_record_fields_win_over_the_body():
    b = frozen_body({**body(), "tag": "client-tag"})
    rec = DispatchRecord(
        priority=2,
        owner="q1",
        abort_key="q1:n:0",
        kv_swap_key="k",
        progress=True,
        predicted_tokens=40,
        pause_kv="swap",
        resumes_preserved=True,
    )
    wire = wire_request(b, rec)
    assert wire["tag"] == "q1:n:0" and wire["priority"] == 2 and wire["owner"] == "q1"
    assert wire["kv_swap_key"] == "k" and wire["progress"] is True and wire["predicted_tokens"] == 40
    assert wire["pause_kv"] == "swap" and wire["resumes_preserved"] is True
    assert b["tag"] == "client-tag"


def test_the_speculation_key_and_the_preemption_key_are_two_fields():
    rec = DispatchRecord(abort_key="q1:n:0")
    rec.call_tag = "llm:call3"
    assert rec.abort_key == "q1:n:0"  # a preemptible run does not lose the speculative call's key
    assert wire_request(frozen_body(body()), rec)["tag"] == "llm:call3"
    rec.call_tag = None
    assert wire_request(frozen_body(body()), rec)["tag"] == "q1:n:0"


def test_a_resumed_call_keeps_its_body():
    b = frozen_body(body())
    rec = DispatchRecord(call_tag="llm:call1", kv_swap_key="llm:call1", resume_ids=(5, 6, 7), max_tokens=17)
    wire = wire_request(b, rec)
    assert wire["resume_ids"] == [5, 6, 7] and wire["max_tokens"] == 17
    assert wire["parts"] == body()["parts"] and wire["stream_text"] is True
    assert b["max_tokens"] == 20 and "resume_ids" not in b
    wire["resume_ids"].append(8)
    assert rec.resume_ids == (5, 6, 7)


@pytest.mark.parametrize("policy", ["fifo", "atlas"])
def test_dispatch_writes_the_record_not_the_submitted_body(policy):
    """fifo runs a plain batch, atlas a preemptible call: either way the engine sees the engine tier's
    fields (owner; atlas also its priority, call tag, KV key and progress) and the body handed to
    `submit_call` is left as it was."""
    from tests.unit.runtime.test_fcfs_calls import run_calls_with_bodies

    bodies, seen = run_calls_with_bodies(policy, [2, 5])
    assert bodies == [{"parts": [["user", f"c{i}"]], "max_tokens": n} for i, n in enumerate([2, 5])]
    assert sorted(r["owner"] for r in seen) == ["p0", "p1"]
    if policy == "atlas":
        assert all(r["priority"] == 0 and r["tag"] and r["kv_swap_key"] and r["progress"] for r in seen)


def test_a_queued_body_is_read_only_and_the_graph_tier_builds_its_own_fields_in():
    """Every body an engine queue holds is frozen: a write raises. The graph tier's stream_text,
    cache_salt and KEEP are built into the body; its query priority goes into the record."""
    from teola.runtime.executors.ray_data import KEEP
    from teola.runtime.requests import frozen_bodies
    from teola.scheduling.base import Pending

    e = Pending(query_id="q", name="n", op="decoding", depth=0, arrival=0.0, requests=[body()])
    with pytest.raises(TypeError):
        e.requests[0]["max_tokens"] = 3  # type: ignore[index]
    [b] = frozen_bodies([{"parts": [["user", "x"]]}], stream_text=True, keep=True, cache_salt="s")
    assert dict(b) == {"parts": [["user", "x"]], "stream_text": True, KEEP: True, "cache_salt": "s"}
    with pytest.raises(TypeError):
        b["cache_salt"] = "other"  # type: ignore[index]
    # (the query priority's path, config -> record -> engine: tests/unit/server/test_hardening_priority.py)


async def test_a_submitters_abort_key_reaches_the_engine_as_the_tag_and_the_body_holds_none():
    from teola.ir.engine_spec import Engine
    from teola.runtime import Runtime
    from tests.unit.api.test_tool_calls import ScriptedLLM

    llm = ScriptedLLM(["a"])
    rt = Runtime({"llm": Engine("llm", kind="vllm", model="m")}, {"llm": llm}, policy="fifo")
    call = {"parts": [["user", "x"]], "complete": True, "max_tokens": 4}
    await rt.start()
    try:
        await rt.submit_call("llm", call, program="p", call_id="c", abort_key="door-1")
    finally:
        await rt.stop()
    (seen,) = llm.requests
    assert seen["tag"] == "door-1" and seen["owner"] == "p" and "tag" not in call


async def test_a_preempted_call_resumes_from_its_record_with_its_body_unchanged():
    """mlfq with a 4-token base quantum on a one-call engine: a long call is demoted and preempted for
    a short one; its resume (token ids so far, budget left) is written into its record, and the
    queued body is the same read-only object throughout."""
    from teola.api.program import Program
    from tests.support.waiting import until
    from tests.unit.runtime.test_preemption import expected, runtime

    rt, engine = runtime("mlfq", budget=1)
    entries, seen = [], []
    real = engine._one

    async def spy(op, i, req, emit):
        seen.append(dict(req))
        return await real(op, i, req, emit)

    engine._one = spy
    await rt.start()
    sched = rt.schedulers["llm"]
    submit = sched.submit
    sched.submit = lambda e: (entries.append((e, e.requests[0])), submit(e))[1]
    try:
        async with Program(rt, "long") as long_prog, Program(rt, "short") as short_prog:
            long_call = asyncio.ensure_future(long_prog.call("write a lot", parent_ids=[], max_tokens=60))
            policy = sched.policy
            await until(lambda: any(st.level > 0 for st in policy.core.calls.values()), timeout=10)
            await short_prog.call("one line", parent_ids=[], max_tokens=3)
            result = (await long_call).result
    finally:
        await rt.stop()
    assert result["text"] == expected(60) and result["preemptions"] >= 1
    long_entry, body = entries[0]
    assert long_entry.requests[0] is body and body["max_tokens"] == 60 and "resume_ids" not in body
    resumed = [r for r in seen if r["parts"][-1][1] == "write a lot" and r.get("resume_ids")]
    assert resumed and all(r["max_tokens"] == 60 - len(r["resume_ids"]) for r in resumed)


async def test_trace_rows_carry_a_trace_status_equal_to_its_string():
    import json

    from teola.runtime.trace_status import TraceStatus
    from tests.unit.compile.test_agent_component import CALL, agent_app, answer

    app, _ = agent_app([CALL, "391."])
    await app.start()
    res = await answer(app)
    assert res.trace and all(type(t["status"]) is TraceStatus for t in res.trace)
    assert {t["status"] for t in res.trace} <= {"ok", "skipped"}
    assert '"status": "ok"' in json.dumps(res.trace[0]) or '"status": "skipped"' in json.dumps(res.trace[0])
