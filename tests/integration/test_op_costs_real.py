"""The op costs the real non-LLM engines report at start (engines.machine.op_costs): the MiniLM
embedder and reranker, the pgvector store and the Postgres text search each fit a positive cost per
request and per item of every op they run, keep the fit's error, and take well under a second."""

import pytest

from engines.llm_text.costs import FITTED
from engines.machine.op_costs import OpCost

pytestmark = pytest.mark.engines


def fitted(engine, ops: set[str], positive_base: bool = True) -> dict[str, OpCost]:
    """The engine's reported costs, each fitted at start (a positive cost per request unless told)."""
    costs = {op: OpCost.from_dict(c) for op, c in engine.profile.op_costs.items()}
    assert set(costs) == ops
    for op, cost in costs.items():
        print(engine.name, op, cost.describe(), f"probe {cost.probe_s * 1e3:.0f} ms")  # for the -s reader
        assert cost.source == FITTED and cost.item_s > 0 and cost.error >= 0, (op, cost)
        assert cost.base_s > 0 or not positive_base, (op, cost)
        assert cost.probe_s < 2.0, (op, cost)  # well under a second unless other work holds the cores
    return costs


async def test_the_embedder_reports_its_fitted_costs(embedding_engine):
    fitted(embedding_engine, {"embedding"})


async def test_the_reranker_reports_its_fitted_costs(reranker_engine):
    fitted(reranker_engine, {"reranking"})


async def test_the_vector_store_reports_its_fitted_costs_and_writes_no_rows_in_its_table(pg_dsn):
    from engines.postgres.vector_store import PgVectorEngine

    store = PgVectorEngine("probed", collection="test_probe", dim=384, persistent=False)
    await store.start()
    try:
        fitted(store, {"ingestion", "searching"})
        assert await store.count() == 0  # the probe ran on a scratch table
    finally:
        await store.stop()


async def test_the_text_search_reports_its_fitted_costs(text_search):
    fitted(text_search, {"searching"}, positive_base=False)  # may be lost in the searches
