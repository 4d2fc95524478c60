"""Each of the four apps on the real engines gives the same answer (greedy decoding) with its
engines in-process and as Ray actors on a local Ray cluster."""
import os

import pytest
import ray

from teola.server.loading import resolve_app

pytestmark = pytest.mark.engines


APPS = ("advanced_rag", "naive_rag", "search_generation", "tool_agent")


async def answer(name: str, runtime: dict) -> tuple[str, list[str]]:
    app = resolve_app(name)
    app.config["runtime"] = runtime
    query, _ = app.sample()
    try:
        r = await app.run(query, {"prescheduling": True})
        return r.output, sorted(t["primitive"] for t in r.trace)
    finally:
        await app.stop()


@pytest.mark.parametrize("name", APPS)
async def test_same_answer_local_and_ray(name):
    local, local_prims = await answer(name, {})
    ray.init(num_cpus=2, include_dashboard=False, namespace="teola-e2e",
             runtime_env={"env_vars": {"PYTHONPATH": os.getcwd(),
                                       **{k: v for k, v in os.environ.items()
                                          if k.startswith(("TEOLA_", "VLLM_", "HF_", "TRANSFORMERS_"))}}})
    try:
        remote, remote_prims = await answer(name, {"executor": "ray"})
    finally:
        ray.shutdown()
    assert local is not None and str(local).strip()
    assert remote == local
    assert remote_prims == local_prims
