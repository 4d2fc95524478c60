"""Staged ingestion into a kept namespace (teola.runtime.staging, teola.runtime.namespaces): the
requests a staged query sends, what it publishes, what a failure drops, the fallback for stores that
cannot publish. On simulated engines; the real store's side is tests/integration/test_pgvector_staging.py."""

import logging

import pytest

from engines.requests import STAGING_PREFIX, staging_namespace
from engines.sim.sim_engine import SimEngine, sim_engines
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.runtime import QueryError
from teola.runtime.requests import build_requests
from teola.runtime.staging import plan_staging, staged_rows
from tests.unit.runtime.test_runtime import QUERY, make_rag


class PublishingSim(SimEngine):
    """A simulated vector store that stages and publishes like the pgvector store."""

    def __init__(self, name: str, **kw) -> None:
        super().__init__(name, **kw)
        self.published: list[tuple[str, str, int]] = []
        self.searched: list[dict] = []

    def publish_namespace(self, staging: str, namespace: str, expected: int) -> int:
        rows = self.store.pop(staging, [])
        if len(rows) != expected:
            raise RuntimeError(f"staged {len(rows)} rows, expected {expected}")
        self.store.setdefault(namespace, []).extend(rows)
        self.published.append((staging, namespace, expected))
        return len(rows)

    def _one(self, op, r):
        if op == "searching" and "staging" in r:
            self.searched.append(r)
            merged = self.store.get(r["namespace"], []) + self.store.get(r["staging"], [])
            e = r["embedding"]
            scored = sorted(
                ((sum(a * b for a, b in zip(e, v)), t) for t, v, _ in merged), key=lambda x: (-x[0], x[1])
            )
            return [{"text": t, "score": float(s)} for s, t in scored[: r["top_k"]]]
        return super()._one(op, r)


def prim(op, inputs, engine="vectordb", **args):
    return Primitive(op, engine, "n", inputs=tuple(inputs), outputs=("out",), args=dict(args))


def test_a_staged_query_ingests_into_its_staging_namespace_and_searches_both():
    values = {
        "e": [[0.1]],
        "c": ["a"],
        "q": [[1.0]],
        "sys.namespace": "kept",
        "sys.staging": {"vectordb": staging_namespace("q1")},
    }
    ingest = prim(PrimOp.INGESTION, ["e", "c", "sys.namespace"], map=("e", "c"))
    assert [r["namespace"] for r in build_requests(ingest, values)] == [STAGING_PREFIX + "q1"]
    search = prim(PrimOp.SEARCHING, ["q"], map=("q",), top_k=2)
    assert build_requests(search, values) == [
        {
            "namespace": "kept",
            "embedding": [1.0],
            "top_k": 2,
            "exact": False,
            "staging": STAGING_PREFIX + "q1",
        }
    ]
    other = prim(PrimOp.INGESTION, ["e", "c", "sys.namespace"], engine="other", map=("e", "c"))
    assert (
        build_requests(other, values)[0]["namespace"] == "kept"
    )  # an engine without staging writes directly
    assert "staging" not in build_requests(search, {**values, "sys.staging": {}})[0]


def test_plan_staging_only_for_kept_namespaces_on_stores_that_publish():
    assert plan_staging("q", None, {"vectordb"}, lambda e: True) == (None, [])
    staging, direct = plan_staging("q", "kept", {"vdb", "sim"}, lambda e: e == "vdb")
    assert (staging.name, staging.namespace, staging.engines, direct) == (
        staging_namespace("q"),
        "kept",
        ("vdb",),
        ["sim"],
    )
    assert staging.by_engine() == {"vdb": staging_namespace("q")}
    assert plan_staging("q", "kept", {"sim"}, lambda e: False) == (None, ["sim"])


def test_staged_rows_counts_the_finished_ingestion_requests_of_one_engine():
    trace = [
        {"engine": "vdb", "op": "ingestion", "status": "ok", "requests": 256},
        {"engine": "vdb", "op": "ingestion", "status": "ok", "requests": 44},
        {"engine": "vdb", "op": "searching", "status": "ok", "requests": 3},
        {"engine": "other", "op": "ingestion", "status": "ok", "requests": 7},
        {"engine": "vdb", "op": "ingestion", "status": "dropped", "requests": 9},
    ]
    assert staged_rows(trace, "vdb") == 300 and staged_rows(trace, "other") == 7


async def test_a_kept_namespace_gets_the_whole_document_at_query_end():
    sims = sim_engines()
    store = sims["vectordb"] = PublishingSim("vectordb")
    app = make_rag(sims)
    try:
        r = await app.run(QUERY, {"namespace": "kept"})
        [(staging, namespace, expected)] = store.published
        assert staging == staging_namespace(r.query_id) and namespace == "kept"
        ingests = [t for t in r.trace if t["op"] == "ingestion"]
        assert len(ingests) > 1 and expected == len(store.store["kept"]) > 4  # several stages, one publish
        assert not any(ns.startswith(STAGING_PREFIX) for ns in store.store)
        assert store.searched and all(
            s["staging"] == staging for s in store.searched
        )  # it read its own documents
        assert store.dropped == []
        await app.run(QUERY)  # a generated namespace is neither staged nor published, and dropped
        assert len(store.published) == 1
        assert len(store.dropped) == 1 and not store.dropped[0].startswith(STAGING_PREFIX)
    finally:
        await app.stop()


async def test_a_failed_query_drops_its_staging_and_publishes_nothing():
    sims = sim_engines()
    store = sims["vectordb"] = PublishingSim("vectordb")
    sims["reranker"] = SimEngine("reranker", fail_on="capital")  # fails after the documents are staged
    app = make_rag(sims)
    try:
        with pytest.raises(QueryError):
            await app.run(QUERY, {"namespace": "kept"})
        await app.runtime.wait_idle()
        assert any(r.get("namespace", "").startswith(STAGING_PREFIX) for r in store.requests)  # it had staged
        assert store.published == [] and "kept" not in store.store
        [dropped] = store.dropped
        assert dropped.startswith(STAGING_PREFIX) and dropped not in store.store
    finally:
        await app.stop()


async def test_a_publish_that_fails_fails_the_query_and_drops_the_staging():
    sims = sim_engines()
    store = sims["vectordb"] = PublishingSim("vectordb")
    store.store["kept"] = []

    def broken(staging, namespace, expected):
        raise RuntimeError("disk full")

    store.publish_namespace = broken
    app = make_rag(sims)
    try:
        with pytest.raises(QueryError, match="not kept in namespace 'kept'.*disk full") as info:
            await app.run(QUERY, {"namespace": "kept"})
        assert info.value.engine == "vectordb"
        [dropped] = store.dropped
        assert dropped.startswith(STAGING_PREFIX) and dropped not in store.store and store.store["kept"] == []
    finally:
        await app.stop()


async def test_a_store_that_cannot_publish_gets_direct_writes_logged_once(caplog):
    sims = sim_engines()
    app = make_rag(sims)
    try:
        with caplog.at_level(logging.WARNING, logger="teola.runtime"):
            await app.run(QUERY, {"namespace": "kept"})
            await app.run(QUERY, {"namespace": "kept"})
        assert "kept" in sims["vectordb"].store
        warned = [r.getMessage() for r in caplog.records if "cannot publish" in r.getMessage()]
        assert len(warned) == 1 and warned[0].startswith(
            "engine 'vectordb' cannot publish a staging namespace"
        )
    finally:
        await app.stop()


def test_a_client_cannot_name_a_staging_namespace():
    app = make_rag(sim_engines())
    with pytest.raises(ValueError, match="staging namespaces"):
        app.compile(QUERY, {"namespace": staging_namespace("someone")})
