"""The Ray executor's "refs" data path on a real local Ray cluster: embedding vectors stay in Ray's
object store between the embedding actor and the vector-store actor (the driver only sees refs),
answers are the same as with the "driver" path and the in-process executor, values the caller asks
for come back as values, and kept vectors outlive the actor that produced them (the driver owns
them). Killing an actor mid-query (default "driver" path): tests/ray/test_ray_executor.py; a
lost intermediate output's error: tests/unit/runtime/test_ray_data.py."""

import pytest
import ray

from apps.advanced_rag import set_template
from bench.studies.overheads.ray_overhead import (
    floats,  # floats in a value (vectors count their elements; a RemoteItem none)
)
from teola import App, Engine
from teola.runtime import RayExecutor
from teola.runtime.executors.ray_data import KEEP, RemoteItem, count_remote
from tests.support.waiting import until

SIM = "engines.sim.sim_engine:SimEngine"
DIM = 384
DOC = " ".join(f"paris is the capital of france fact{i} river seine museum louvre" for i in range(60))
QUERY = {"question": "what is the capital of france", "documents": [DOC]}
KEPT = ["search.query_results", "rerank.context", "query_embedding.question_embedding"]


def make_rag(runtime: dict) -> App:
    app = App("rag", config={"runtime": runtime})
    app.register_engine(
        Engine(
            "llm",
            kind=SIM,
            ops=["prefilling", "partial_prefilling", "full_prefilling", "decoding", "partial_decoding"],
        )
    )
    app.register_engine(Engine("embedding", kind=SIM, ops=["embedding"], max_efficient_batch=4, dim=DIM))
    app.register_engine(Engine("vectordb", kind=SIM, ops=["ingestion", "searching"]))
    app.register_engine(Engine("reranker", kind=SIM, ops=["reranking"]))
    set_template(app, chunk_size=64, chunk_overlap=8, top_k=4, max_tokens=32)
    return app


def spy(executor: RayExecutor) -> list[tuple[str, list, list]]:
    """Record every batch the driver sends through `executor` and the results it gets back."""
    seen: list[tuple[str, list, list]] = []
    execute = executor.execute

    async def recording(inst, op, requests):
        results = await execute(inst, op, requests)
        seen.append((op, requests, results))
        return results

    executor.execute = recording
    return seen


async def run_rag(runtime: dict) -> tuple:
    app = make_rag(runtime)
    try:
        await app.start()
        seen = spy(app.runtime.executor) if isinstance(app.runtime.executor, RayExecutor) else []
        r = await app.run(QUERY, {"return_values": KEPT})
        return r, seen
    finally:
        await app.stop()


def vector_traffic(seen: list) -> tuple[int, int, int]:
    """(floats the driver received from embedding batches, floats it sent in ingestion and search
    requests, refs it received)"""
    got = sum(floats(res) for op, _, res in seen if op == "embedding")
    sent = sum(floats(reqs) for op, reqs, _ in seen if op in ("ingestion", "searching"))
    refs = sum(count_remote(res) for op, _, res in seen if op == "embedding")
    return got, sent, refs


async def test_vectors_stay_on_the_actors_and_answers_match_the_driver_path(local_ray):
    local, _ = await run_rag({})
    via_driver, seen_driver = await run_rag({"executor": "ray", "ray": {"data_path": "driver"}})
    # min_ref_bytes 0: every marked batch stays remote (by default only batches of 100 KiB and more)
    via_refs, seen_refs = await run_rag({"executor": "ray", "ray": {"data_path": "refs", "min_ref_bytes": 0}})
    for r in (via_driver, via_refs):
        assert r.output == local.output and r.output.startswith("answer ")
        assert r.values == local.values  # search hits, reranked context, and the kept embedding itself
    assert len(local.values["query_embedding.question_embedding"][0]) == DIM
    chunks = sum(len(reqs) for op, reqs, _ in seen_refs if op == "ingestion")
    assert chunks >= 10
    got, sent, refs = vector_traffic(seen_driver)
    assert got >= chunks * DIM and sent >= chunks * DIM and refs == 0
    got, sent, refs = vector_traffic(seen_refs)
    # no vector crossed the driver but the question's: the caller asked for it (return_values), so it
    # came back, and its search request carries it
    assert got == DIM and sent == DIM
    n_embedded = sum(len(reqs) for op, reqs, _ in seen_refs if op == "embedding")
    assert refs == n_embedded - 1
    kept = [r for op, reqs, _ in seen_refs if op == "embedding" for r in reqs if r.get(KEEP)]
    assert len(kept) == refs


async def test_kept_vectors_are_read_by_the_consumer_actor_and_outlive_their_producer(local_ray):
    ex = RayExecutor(data_path="refs")
    emb = await ex.launch(Engine("embedding", kind=SIM, ops=["embedding"], dim=DIM), 0, None)
    db = await ex.launch(Engine("vectordb", kind=SIM, ops=["ingestion", "searching"]), 0, None)
    try:
        # by default a marked batch stays remote only from ~100 KiB on: 2 vectors come back, 40 stay
        small = await ex.execute(emb, "embedding", [{"text": f"fact {i}", KEEP: True} for i in range(2)])
        big = await ex.execute(emb, "embedding", [{"text": f"fact {i}", KEEP: True} for i in range(40)])
        assert count_remote(small) == 0 and count_remote(big) == 40
        ex.min_ref_bytes = 0
        out = await ex.execute(emb, "embedding", [{"text": "river seine", KEEP: True}, {"text": "louvre"}])
        assert isinstance(out[0], RemoteItem) and len(out[1]) == DIM  # only the marked one stays remote
        assert out[0].source == "embedding/0"
        ok = await ex.execute(
            db, "ingestion", [{"namespace": "n", "text": "river seine", "embedding": out[0], "meta": {}}]
        )
        assert ok == [None]
        unread = (await ex.execute(emb, "embedding", [{"text": "river seine", KEEP: True}]))[0]
        before = (await ex.where(emb))["pid"]
        ray.kill(emb.handle, no_restart=False)  # the producer dies; the driver owns what it kept
        await until(lambda: _restarted(ex, emb, before), timeout=60)
        hits = await ex.execute(db, "searching", [{"namespace": "n", "embedding": unread, "top_k": 1}])
        assert hits[0][0]["text"] == "river seine" and hits[0][0]["score"] == pytest.approx(1.0)
    finally:
        await ex.shutdown(db)
        await ex.shutdown(emb)


async def _restarted(ex: RayExecutor, inst, pid: int) -> bool:
    try:
        return (await ex.where(inst))["pid"] != pid
    except ray.exceptions.RayActorError:
        return False
