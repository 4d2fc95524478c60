"""The Ray executor on a two-node cluster on this machine (two raylets with their own resources,
ray.cluster_utils), with deterministic engines loaded by import path in the actors:

- what Ray stores (job table, actor table, task events) holds no secret of the driver's
  environment, and the engine that needs one gets it (teola.runtime.executors.ray_env);
- engines are placed on the nodes whose resources they ask for, on a cluster the executor joins by its
  address; an intermediate output passes from an actor on the second node to an actor on the head
  node in Ray's object store: the driver never deserializes it;
- the second node dies under load: the queries with work there fail with QueryUnavailable (HTTP 503),
  every other query succeeds, the engines that were there are placed again on the live node (by Ray's
  restart, and by the executor for an actor Ray will not restart), and later queries succeed.

The tests run in file order on one cluster; the last one kills its second node."""

import asyncio

import pytest
import ray
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from apps.advanced_rag import set_template
from teola import App, Engine
from teola.runtime import QueryUnavailable, RayExecutor
from teola.runtime.executors.ray_data import MIN_REF_BYTES, RemoteItem
from tests.support.env_probe import PROBE
from tests.support.waiting import until

SIM = "engines.sim.sim_engine:SimEngine"
DIM = 2048  # the 12 chunks' vectors pass Ray's 100 KiB inline limit: they are kept in a node's object store
DOC = " ".join(f"paris is the capital of france fact{i} river seine museum louvre" for i in range(60))
QUERY = {"question": "what is the capital of france", "documents": [DOC]}
SECRETS = {
    "TEOLA_SECRET": "signing-secret-7f3a",
    "TEOLA_API_KEYS": "tenant-a:key-b81c",
    "HF_TOKEN": "hf_tok_29d1",
    "TEOLA_PG_DSN": "postgresql://teola:pw-c4e2@db/teola",
}
SETTING = {"VLLM_TEOLA_TEST_SETTING": "forwarded-5e1b"}
FAST_HEALTH = {
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 3,
}  # a dead node is seen in ~2 s


@pytest.fixture(scope="module")
def cluster():
    if ray.is_initialized():
        ray.shutdown()
    c = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "resources": {"node_a": 1},
            "include_dashboard": False,
            "_system_config": FAST_HEALTH,
        },
    )
    second = c.add_node(num_cpus=1, resources={"node_b": 1})
    c.wait_for_nodes()
    try:
        with pytest.MonkeyPatch.context() as mp:  # the raylets started without them; the driver has them
            for k, v in {**SECRETS, **SETTING}.items():
                mp.setenv(k, v)
            connect = RayExecutor(address=c.address, namespace="teola-cluster")
            connect._init()  # the job's runtime_env is the executor's
            yield c, second
    finally:
        ray.shutdown()
        c.shutdown()


def node_with(resource: str) -> str:
    return next(n["NodeID"] for n in ray.nodes() if n["Alive"] and resource in n["Resources"])


def make_rag(place: dict, latency: float = 0.0) -> App:
    """Advanced RAG on SimEngines, intermediate outputs kept on the actors ("refs"); `place`: actor
    options per engine."""
    app = App("rag", config={"runtime": {"executor": "ray", "ray": {"data_path": "refs"}}})
    llm_ops = ["prefilling", "partial_prefilling", "full_prefilling", "decoding", "partial_decoding"]
    app.register_engine(Engine("llm", kind=SIM, ops=llm_ops, resources=place["llm"]))
    app.register_engine(
        Engine(
            "embedding",
            kind=SIM,
            ops=["embedding"],
            max_efficient_batch=32,
            dim=DIM,
            resources=place["embedding"],
            **({"latency": {1: latency}} if latency else {}),
        )
    )
    app.register_engine(
        Engine("vectordb", kind=SIM, ops=["ingestion", "searching"], resources=place["vectordb"])
    )
    app.register_engine(Engine("reranker", kind=SIM, ops=["reranking"], resources=place["reranker"]))
    set_template(app, chunk_size=64, chunk_overlap=8, top_k=4, max_tokens=32)
    return app


@pytest.fixture(scope="module")
async def apps(cluster):
    """`second`: embedding and reranker prefer the second node (soft affinity: when it is gone Ray
    may place them elsewhere; the reranker's actor is never restarted by Ray, so the executor
    replaces it); `head`: the same app with every engine on the head node. Both share the LLM and
    vector-store actors."""
    on_a = {"resources": {"node_a": 0.01}}
    # Ray follows a soft node affinity only for an actor that asks for some resource
    prefer_b = {
        "num_cpus": 0.01,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node_with("node_b"), soft=True),
    }
    second = make_rag(
        {"llm": on_a, "vectordb": on_a, "embedding": prefer_b, "reranker": {**prefer_b, "max_restarts": 0}},
        latency=0.4,
    )
    head = make_rag(
        {"llm": on_a, "vectordb": on_a, "embedding": on_a, "reranker": {"resources": {"node_a": 0.02}}}
    )
    try:
        await second.start()
        await head.start()
        yield second, head
    finally:
        await second.stop()
        await head.stop()


def gcs_bytes() -> bytes:
    """Everything Ray's job and state APIs read about jobs, actors and tasks, as stored in its GCS."""
    gcs = ray._private.state.state._connect_and_get_accessor()
    jobs = gcs.get_job_table(skip_submission_job_info_field=False, skip_is_running_tasks_field=True)
    return b"".join([*jobs, *gcs.get_actor_table(None, None), *gcs.get_task_events()])


async def test_ray_stores_no_secret_and_the_engine_needing_one_gets_it_by_call(cluster):
    plain = RayExecutor(share_actors=False)
    other = await plain.launch(Engine("embedding", kind=PROBE, ops=["embedding"]), 0, None)
    ex = probe = None
    try:
        names = [*SECRETS, *SETTING]
        seen = await plain.execute(other, "embedding", [{"text": n} for n in names])
        stored = gcs_bytes()
        assert SETTING["VLLM_TEOLA_TEST_SETTING"].encode() in stored  # the job's runtime_env is in there
        assert [k for k, v in SECRETS.items() if v.encode() in stored] == []
        assert [s["env"] for s in seen] == [None] * len(SECRETS) + list(SETTING.values())
        ex = RayExecutor(secret_env={"vectordb": ["TEOLA_PG_DSN"]}, share_actors=False)
        probe = await ex.launch(
            Engine(
                "vectordb",
                kind=PROBE,
                ops=["embedding"],
                dsn=SECRETS["TEOLA_PG_DSN"],
                resources={"resources": {"node_b": 0.01}},
            ),
            0,
            None,
        )
        seen = await ex.execute(probe, "embedding", [{"text": n} for n in names])
        assert {n: s["env"] for n, s in zip(names, seen)} == {
            "TEOLA_SECRET": None,
            "TEOLA_API_KEYS": None,
            "HF_TOKEN": None,
            "TEOLA_PG_DSN": SECRETS["TEOLA_PG_DSN"],
            **SETTING,
        }
        assert seen[0]["options"] == {"dsn": SECRETS["TEOLA_PG_DSN"]}
        stored = gcs_bytes()  # the probe's constructor arguments and tasks included
        assert [
            k for k, v in SECRETS.items() if v.encode() in stored or v.split("@")[0].encode() in stored
        ] == []
    finally:
        await plain.shutdown(other)
        if probe is not None:
            await ex.shutdown(probe)


def spy_batches(executor: RayExecutor) -> list[tuple[str, list, list]]:
    seen: list[tuple[str, list, list]] = []
    execute = executor.execute

    async def recording(inst, op, requests):
        results = await execute(inst, op, requests)
        seen.append((op, requests, results))
        return results

    executor.execute = recording
    return seen


def spy_driver_reads(monkeypatch) -> set[str]:
    """The ids of the objects this process deserializes (ray.get and `await ref` both do)."""
    from ray._private.serialization import SerializationContext

    read: set[str] = set()
    original = SerializationContext.deserialize_objects

    def recording(self, serialized, object_refs, *args, **kwargs):
        read.update(ref.hex() for ref in object_refs)
        return original(self, serialized, object_refs, *args, **kwargs)

    monkeypatch.setattr(SerializationContext, "deserialize_objects", recording)
    return read


async def test_an_intermediate_output_goes_from_node_to_node_without_the_driver(apps, monkeypatch):
    second, head = apps
    where = second.runtime.executor.placements
    assert where["embedding/0"]["node_id"] == node_with("node_b") != where["vectordb/0"]["node_id"]
    assert where["vectordb/0"]["node_id"] == node_with("node_a")
    # engines placed by the resources they ask for, on a cluster the executor joined by its address
    assert where["reranker/0"]["node_id"] == where["embedding/0"]["node_id"]
    assert where["llm/0"]["node_id"] == where["vectordb/0"]["node_id"]
    batches = spy_batches(second.runtime.executor)
    read = spy_driver_reads(monkeypatch)
    expected = (await head.run(QUERY)).output  # the same app on one node
    assert (await second.run(QUERY)).output == expected

    kept = {
        r.ref for op, _, results in batches if op == "embedding" for r in results if isinstance(r, RemoteItem)
    }
    assert kept, "the chunks' vectors should have stayed in the object store"
    consumed = [
        r
        for op, reqs, _ in batches
        if op == "ingestion"
        for req in reqs
        for r in req.values()
        if isinstance(r, RemoteItem)
    ]
    assert {r.ref for r in consumed} == kept  # the ingestion actor was handed the refs
    locations = ray.experimental.get_object_locations(list(kept))
    for ref in kept:
        # stored on the second node (not inlined into the driver) and fetched by the head node's actor
        assert locations[ref]["object_size"] > MIN_REF_BYTES
        assert set(locations[ref]["node_ids"]) >= {node_with("node_b"), node_with("node_a")}
    assert read and not read & {ref.hex() for ref in kept}  # the driver read other results, never these
    await next(iter(kept))
    assert next(iter(kept)).hex() in read  # the spy does see a read by the driver


async def test_second_node_dies_under_load_its_queries_fail_503_its_engines_come_back(cluster, apps):
    c, node = cluster
    second, head = apps
    ex = second.runtime.executor
    before = dict(ex.placements)
    node_with_id_b = node_with("node_b")
    emb = second.runtime.instances["embedding"][0]
    runs = [asyncio.create_task(second.run(QUERY)) for _ in range(6)]
    others = [asyncio.create_task(head.run(QUERY)) for _ in range(6)]
    await until(
        lambda: ex.call(emb, "busy"), timeout=60, interval=0.05
    )  # an embedding batch is running on the second node
    await asyncio.sleep(0.5)
    c.remove_node(node, allow_graceful=False)
    results = await asyncio.wait_for(asyncio.gather(*runs, return_exceptions=True), 120)
    failed = [r for r in results if isinstance(r, BaseException)]
    assert failed, "the queries with work on the dead node should fail"
    for e in failed:
        assert isinstance(e, QueryUnavailable), repr(e)  # HTTP 503 (teola/server/queries.py), retry
        assert "embedding/0" in str(e) or "reranker/0" in str(e), str(e)
    answers = await asyncio.wait_for(asyncio.gather(*others), 60)
    expected = answers[0].output
    assert all(a.output == expected for a in answers)
    assert all(r.output == expected for r in results if not isinstance(r, BaseException))

    head_node = node_with("node_a")
    moved = ("embedding/0", "reranker/0")
    # placed again on the live node: the embedding actor by Ray's restart, the reranker's (which Ray
    # does not restart) by the executor; the supervisor sees the reranker's death by its probe if no
    # batch of the queries above ran on it
    await until(
        lambda: all(ex.placements[n]["node_id"] == head_node for n in moved), timeout=90, interval=0.2
    )
    await until(
        lambda: all(second.runtime.health()[e]["healthy"] for e in ("embedding", "reranker")),
        timeout=90,
        interval=0.2,
    )
    assert all(before[n]["node_id"] == node_with_id_b for n in moved)
    for _ in range(2):
        assert (await asyncio.wait_for(second.run(QUERY), 60)).output == expected
    for name in ("llm/0", "vectordb/0"):
        assert ex.placements[name] == before[name]  # nothing on the live node was restarted
    assert second.runtime.health()["llm"]["restarts"] == 0
