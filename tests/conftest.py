"""Shared test set-up: engine fixtures are session-scoped so real engines start once per run."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

pytest_plugins = [
    m for m in ("tests.fixtures.llm", "tests.fixtures.pg", "tests.fixtures.vllm_server")
    if os.path.exists(os.path.join(os.path.dirname(__file__), "fixtures", m.split(".")[-1] + ".py"))
]
