"""The advanced-RAG app on the real engines gives the same answer (greedy decoding) with its
engines in-process and as Ray actors on a local Ray cluster."""
import os

import pytest
import ray

from apps import advanced_rag
from teola.server.samples import run_sample_query

pytestmark = pytest.mark.engines


async def answer(runtime: dict) -> tuple[str, list[str]]:
    app = advanced_rag.build()
    app.config["runtime"] = runtime
    query, _ = run_sample_query("advanced_rag")
    try:
        r = await app.run(query, {"prescheduling": True})
        return r.output, sorted(t["primitive"] for t in r.trace)
    finally:
        await app.stop()


async def test_advanced_rag_same_answer_local_and_ray():
    local, local_prims = await answer({})
    ray.init(num_cpus=2, include_dashboard=False, namespace="teola-e2e",
             runtime_env={"env_vars": {"PYTHONPATH": os.getcwd(),
                                       **{k: v for k, v in os.environ.items()
                                          if k.startswith(("TEOLA_", "VLLM_", "HF_", "TRANSFORMERS_"))}}})
    try:
        remote, remote_prims = await answer({"executor": "ray"})
    finally:
        ray.shutdown()
    assert isinstance(local, str) and local.strip()
    assert remote == local
    assert remote_prims == local_prims
