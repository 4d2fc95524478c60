"""`teola tune`'s batch probe on the real sentence-transformers models: a latency curve per batch
size and a max efficient batch chosen from it (the knee), which the engine settings pass on."""

import pytest

from engines.machine.hardware import detect
from engines.machine.knee import knee
from engines.tuning.settings import resolve_options
from engines.tuning.tune import tune_batches

pytestmark = pytest.mark.engines

# `teola tune` probes 1-64 twice each (engines.tuning.tune.BATCHES: 44 s here); the wiring this test checks
# (curve -> knee -> engine settings) needs a curve, not the full one.
BATCHES = (1, 4, 16)


async def test_the_embedder_curve_gives_a_max_efficient_batch_that_reaches_the_engine():
    chosen = {"sentence_transformers": {"torch_threads": 1}, "reranker": {"torch_threads": 1}}
    rows: list = []
    await tune_batches(
        chosen, rows, lambda msg: None, BATCHES, repeats=1
    )  # probe_curve per engine, then the knee
    curve = next(r for r in rows if r["engine"] == "sentence_transformers")["settings"]["curve"]
    assert sorted(curve) == list(BATCHES) and all(t > 0 for t in curve.values())
    assert curve[16] > curve[1]  # a bigger batch takes longer in total
    for kind in ("sentence_transformers", "reranker"):
        best = chosen[kind]["max_efficient_batch"]
        assert best in BATCHES
        assert best == knee(next(r for r in rows if r["engine"] == kind)["settings"]["curve"])
        opts = resolve_options(kind, {}, hw=detect(), tuned=chosen)
        assert opts["max_efficient_batch"] == best
