"""The maximum efficient batch taken from a latency curve (engines.machine.knee)."""

import pytest

from engines.machine.knee import knee


def test_knee_is_where_throughput_stops_growing():
    # a batch takes 1 s up to 10 items, then 0.1 s per item: throughput 1, 2, 4, 8, 10, 10, 10 items/s
    curve = {b: max(1.0, 0.1 * b) for b in (1, 2, 4, 8, 16, 32, 64)}
    assert knee(curve) == 16  # the first within 10% of 10 items/s
    assert knee(curve, tolerance=0.3) == 8  # 8 >= 0.7 x 10
    # fixed 1 s + 0.1 s per item keeps growing: throughput 7.6 at 32 is below 0.9 x 8.6 at 64
    assert knee({b: 1.0 + 0.1 * b for b in (1, 2, 4, 8, 16, 32, 64)}) == 64
    assert knee({b: 0.5 * b for b in (1, 2, 4)}) == 1  # linear: no gain from batching
    assert knee({1: 1.0, 8: 1.0, 16: 4.0}) == 8  # throughput falls again past 8


def test_knee_rejects_empty_or_bad_curves():
    with pytest.raises(ValueError, match="latency curve"):
        knee({})
    with pytest.raises(ValueError, match="tolerance"):
        knee({1: 1.0}, tolerance=1.0)
