"""bench.studies.sim.step_shape's fits and page: the floor form recovers a flat-then-linear shape the linear
form bends."""

import pytest

from bench.studies.sim.step_shape import fit_floor, fit_linear, markdown


def test_linear_fit_recovers_a_line():
    base, per = fit_linear([(1, 3.0), (2, 5.0), (4, 9.0)])
    assert base == pytest.approx(1.0) and per == pytest.approx(2.0)


def test_floor_fit_recovers_a_flat_then_linear_shape():
    shape = [(b, max(22.0, 18.0 + 1.0 * b)) for b in (1, 2, 3, 4, 6, 8, 16)]
    floor, base, per = fit_floor(shape)
    assert floor == pytest.approx(22.0) and base == pytest.approx(18.0) and per == pytest.approx(1.0)
    lb, lp = fit_linear(shape)
    assert max(abs(lb + lp * b - s) / s for b, s in shape) > 0.05  # the line cannot follow the flat part


def test_page_lists_every_round_and_counts_shapes_within_10_percent():
    rows = [{"batch": b, "out": 40, "step_ms": [max(22.0, 18.0 + b)] * 3} for b in (1, 2, 4, 8, 16)]
    md = markdown(
        {"rows": rows, "outs": [40], "rounds": 3, "words": 30, "seconds": 60.0, "machine_cpu": "cpu"},
        "python -m bench step_shape",
    )
    assert "| 16 | 40 | 34.0, 34.0, 34.0 | 34.0 |" in md
    assert "floor max(22.0, 18.0 + 1.00 x batch) ms, 5 of 5 within 10%" in md
