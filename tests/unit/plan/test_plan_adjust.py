"""SamuLLM's dynamic scheduler (teola.plan.adjust): the planned stages run as planned when the models
finish in the planned order; when they do not, the next stage is adjusted from what is running,
without searching again (paper section 4.3), and run-job's executor follows it."""

from __future__ import annotations

from teola.plan.adjust import StageAdjuster
from teola.plan.cost import Plan

P1, P2, P3, P4 = Plan(1, 1), Plan(1, 2), Plan(1, 3), Plan(1, 4)


def test_in_the_planned_order_the_stages_run_as_planned():
    stages = [{"a": P1, "b": P1, "c": P2}, {"b": P1, "c": P3}, {"c": P4}]
    adj = StageAdjuster(stages, 4)
    assert adj.first() == stages[0]
    assert adj.next(stages[0], {"a"}) == stages[1]
    assert adj.next(stages[1], {"a", "b"}) == stages[2]


def test_a_model_finishing_first_unexpectedly_lets_the_next_stage_start_beside_the_others():
    """Planned: a finishes first in stage 1; b in stage 2. b finishes first instead: a is in no later
    stage, so it keeps running until done; c's next pair keeps its plan, so c keeps running; d (stage
    2) takes the one GPU left. When a finishes, stage 3: c keeps its plan, d grows to two GPUs."""
    stages = [{"a": P1, "b": P1, "c": P2}, {"b": P1, "c": P2, "d": P1}, {"c": P2, "d": P2}]
    adj = StageAdjuster(stages, 4)
    run = adj.first()
    run = adj.next(run, {"b"})
    assert run == {"a": P1, "c": P2, "d": P1}
    assert adj.next(run, {"a", "b"}) == {"c": P2, "d": P2}


def test_a_running_model_whose_next_plan_differs_yields_to_the_next_stage_and_keeps_free_gpus():
    """Planned: a finishes first; stage 2 stops c and runs d; c comes back on four GPUs in stage 3.
    b finishes first instead: a keeps running (its last stage); stage 2's pair d is scheduled first,
    and c (next pair: another plan) keeps its two GPUs only if they are still free."""
    crowded = [{"a": P1, "b": P1, "c": P2}, {"b": P1, "d": P3}, {"c": P4}]
    adj = StageAdjuster(crowded, 4)
    run = adj.next(adj.first(), {"b"})
    assert run == {"a": P1, "d": P3}  # c is stopped: d took the GPUs
    run = adj.next(run, {"a", "b"})
    assert run == {"d": P3}  # stage 3's c (4 GPUs) waits beside d
    assert adj.next(run, {"a", "b", "d"}) == {"c": P4}
    roomy = [{"a": P1, "b": P1, "c": P2}, {"b": P1, "d": P1}, {"c": P4}]
    adj = StageAdjuster(roomy, 4)
    assert adj.next(adj.first(), {"b"}) == {"a": P1, "d": P1, "c": P2}  # c keeps the GPUs left


def test_a_downstream_pair_waits_until_its_input_model_runs_or_is_done():
    """f reads a: the planned stage 2 puts f beside a, but a's next pair does not fit beside the model
    kept running, so f is not started on its own (it could never finish)."""
    stages = [{"a": P1, "b": P1}, {"a": P2, "f": P1}]
    adj = StageAdjuster(stages, 3, {"f": {"a"}})
    run = adj.first()
    assert adj.next(run, {"b"}) == {"a": P2, "f": P1}
    adj = StageAdjuster([{"a": P1, "b": P2}, {"a": P3, "f": P1}], 4, {"f": {"a"}})
    run = adj.first()
    # planned: b finishes first; a finishes first instead, b keeps running (its last stage); a is done
    assert adj.next(run, {"a"}) == {"b": P2, "f": P1}


def test_the_executor_follows_the_adjustment_when_a_model_finishes_out_of_order():
    """The planned stages expect b to finish first and the fuser to start beside a; a (shorter
    outputs) finishes first instead: b keeps running (its last stage), the fuser starts on a's device
    beside it (reading b's answers as they come), and moves to both devices at b's finish; no search
    runs."""
    from teola.sim.virtual_loop import run_virtual
    from tests.unit.plan.test_plan_execute import _executor

    ex, _, _ = _executor(2)
    run_virtual(ex.run([{"a": P1, "b": P1}, {"a": P1, "f": P1}, {"f": P2}]))
    assert all(ex.finished(m) for m in "abf") and not ex.replans
    assert [s["finished"] for s in ex.stage_log] == [["a"], ["b"], ["f"]]
    assert [s["plans"] for s in ex.stage_log] == [
        {"a": "tp1xdp1", "b": "tp1xdp1"},
        {"b": "tp1xdp1", "f": "tp1xdp1"},
        {"f": "tp1xdp2"},
    ]
