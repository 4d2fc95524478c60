"""bench.studies.rag.rag_setup.make_apps: the suite's pre-tuned embedder batch applies unless shipped defaults
are asked for."""

from __future__ import annotations


def _embedding_batch(apps) -> int:
    return next(iter(apps.values())).engines["embedding"].max_efficient_batch


def test_bench_tuning_sets_the_embedder_batch_and_shipped_defaults_leave_it_out():
    from bench.studies.rag.rag_setup import BENCH_TUNING, make_apps
    from teola import Engine

    shipped = Engine("embedding", kind="sentence_transformers").max_efficient_batch  # this machine's default
    assert shipped != BENCH_TUNING["embedding"]["max_efficient_batch"]
    assert _embedding_batch(make_apps(("naive_rag",))) == BENCH_TUNING["embedding"]["max_efficient_batch"]
    assert _embedding_batch(make_apps(("naive_rag",), bench_tuning=False)) == shipped
    assert (
        _embedding_batch(
            make_apps(("naive_rag",), {"embedding": {"max_efficient_batch": 5}}, bench_tuning=False)
        )
        == 5
    )
