"""bench.studies.sim.sim_lamps' handlings (issue 62): the baselines get INFERCEPT's own choice, made when a
call reaches its API call from its context and the running batch's then (the simulated engine's
`decide_pause`); LAMPS queues "auto", which teola resolves from LAMPS' own predictions, and that
handling is the one applied and reported. Tiny simulated runs; no timing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import bench.studies.sim.sim_lamps as sim
import bench.studies.sim.sim_lamps_handling as handling

COSTS = {"fwd": 1e-3, "swap": 1e-5, "api_means": {"qa": 0.5}}


@pytest.mark.parametrize(
    "context, running, expected",
    [
        # C = 120: preserve 0.5 x 120 = 60; discard 0.12 x 120 = 14.4; swap 2 x 0.0012 x 120 = 0.288
        (120, 0, "swap"),
        # beside 50,000 running tokens: discard 0.12 x 50,120 = 6,014; swap 2 x 0.0012 x 50,120 = 120.3
        # > preserve 60
        (120, 50_000, "preserve"),
    ],
)
def test_infercept_decides_at_the_pause_from_the_running_batch(context, running, expected):
    decided: dict[str, str] = {}
    decide = handling.infercept_at_pause(COSTS, {"r0": "qa"}, decided)
    assert decide(SimpleNamespace(req={"kv_key": "r0"}, computed=context), running) == expected
    assert decided == {"r0": expected}


def test_the_baselines_apply_and_report_the_handling_chosen_at_the_pause(monkeypatch):
    at_pause = []

    def deciding(costs, kinds, decided):
        def decide(seq, running):
            at_pause.append((seq.computed, running))
            decided[seq.req["kv_key"]] = "preserve"
            return "preserve"

        return decide

    monkeypatch.setattr(handling, "infercept", lambda *a: "discard")  # what the request is queued with
    monkeypatch.setattr(sim, "infercept_at_pause", deciding)
    out = sim.run_point("a100-llama2-7b", "toolbench", "FCFS+INFERCEPT", 0.5, 0.0, 4.0, 0.0)
    assert at_pause and all(context > 0 for context, _ in at_pause)
    assert out["handlings"]["preserve"] == len(at_pause) and out["handlings"]["discard"] == 0


def test_lamps_queues_auto_and_reports_the_handling_it_was_ranked_under(monkeypatch):
    from teola.runtime import Runtime
    from teola.scheduling.program.api_handling import HANDLINGS

    sent = []
    submit = Runtime.submit_call

    async def recording(self, engine, req, **kw):
        queued = req.get("pause_kv")
        out = await submit(self, engine, req, **kw)
        sent.append((queued, out.pause_kv, req.get("pause_kv")))
        return out

    monkeypatch.setattr(Runtime, "submit_call", recording)
    out = sim.run_point("a100-llama2-7b", "toolbench", "LAMPS", 0.5, 0.0, 4.0, 0.0)
    pauses = [(q, applied, after) for q, applied, after in sent if q is not None]
    # the caller's dict keeps the "auto" it was queued with; the outcome names the handling applied
    assert pauses and all(q == after == "auto" and applied in HANDLINGS for q, applied, after in pauses)
    assert sum(out["handlings"].values()) <= len(pauses)
