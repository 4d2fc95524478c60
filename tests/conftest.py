"""Shared test set-up: engine fixtures are session-scoped so real engines start once per run."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

pytest_plugins = [
    m
    for m in (
        "tests.fixtures.llm",
        "tests.fixtures.pg",
        "tests.fixtures.vllm_server",
        "tests.fixtures.e2e_server",
    )
    if os.path.exists(os.path.join(os.path.dirname(__file__), "fixtures", m.split(".")[-1] + ".py"))
]

# Markers by what a test needs, so `make check` can leave out everything that starts something:
# engines (vLLM, sentence-transformers), services (PostgreSQL, a browser, Ray, servers in other
# processes). A test gets them from its fixtures and from its folder, besides its own pytestmark.
ENGINE_FIXTURES = {"llm_engine", "embedding_engine", "reranker_engine", "llm_pair"}
SERVICE_FIXTURES = {"pg_dsn", "vector_store", "text_search", "vllm_server", "plain_vllm_server", "remote_llm"}
SERVICE_FOLDERS = ("integration", "e2e", "ray")


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & ENGINE_FIXTURES:
            item.add_marker(pytest.mark.engines)
        folder = item.path.relative_to(config.rootpath).parts[1:2]
        if names & SERVICE_FIXTURES or (
            folder and folder[0] in SERVICE_FOLDERS and item.get_closest_marker("engines") is None
        ):
            item.add_marker(pytest.mark.services)
