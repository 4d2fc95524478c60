"""LAMPS' output-length predictor (teola.scheduling.program.length_predictor): it learns a known relation,
beats a constant guess on the shipped trace of the real engine (bench/data/lengths-smollm2-135m.json, with
a cheap hashed bag-of-words embedding standing in for MiniLM), saves and loads, and its prediction
reaches the policy as a request's "predicted_tokens"."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from teola.scheduling.program.length_predictor import LengthPredictor, accuracy, split

TRACE = Path(__file__).resolve().parents[3] / "bench" / "data" / "lengths-smollm2-135m.json"


def test_it_learns_a_known_relation_between_embedding_and_length():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    lengths = np.where(x[:, 0] > 0.5, 95, np.where(x[:, 0] < -0.5, 5, 45))  # bins 9, 0, 4
    p = LengthPredictor().fit(x[:300], lengths[:300])
    acc = accuracy(p.predict(x[300:]), lengths[300:])
    assert acc["acc5"] >= 0.9 and acc["mae"] < 5


def test_on_the_shipped_trace_it_beats_the_constant_guess():
    from engines.sim.sim_engine import embed

    rows = json.loads(TRACE.read_text())["rows"]
    assert len(rows) >= 90 and len({r["style"] for r in rows}) == 3
    x = np.array([embed(r["prompt"]) for r in rows])
    y = np.array([r["output_tokens"] for r in rows])
    train, test = split(len(rows), 0.2, seed=0)
    p = LengthPredictor().fit(x[train], y[train])
    learned = accuracy(p.predict(x[test]), y[test])
    constant = accuracy(np.full(len(test), np.median(y[train])), y[test])
    assert learned["mae"] < constant["mae"]


def test_save_and_load_give_the_same_predictions(tmp_path):
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(50, 4)), rng.integers(0, 200, size=50)
    p = LengthPredictor(epochs=20).fit(x, y)
    p.save(tmp_path / "p.json")
    assert (LengthPredictor.load(tmp_path / "p.json").predict(x) == p.predict(x)).all()
    with pytest.raises(RuntimeError, match="fit"):
        LengthPredictor().predict(x)
    with pytest.raises(ValueError, match="one length per row"):
        LengthPredictor().fit(x, y[:3])


async def test_a_programs_predictor_reaches_the_request():
    from teola.api.program import Program
    from tests.unit.api.test_tool_calls import runtime

    rt, engine = runtime(["ok"], policy="sjf")
    await rt.start()
    try:
        async with Program(rt, "p", predictor=lambda prompt: len(prompt)) as prog:
            await prog.call("four", max_tokens=8)
            await prog.call_with_tools("seven!!", {"t": print}, max_tokens=8)
    finally:
        await rt.stop()
    assert [r["predicted_tokens"] for r in engine.requests] == [4, 7]
