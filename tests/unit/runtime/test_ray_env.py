"""What the Ray executor puts where Ray stores it (the job's runtime_env, actor constructor
arguments) and what it hands one actor by call (teola.runtime.executors.ray_env), without a
cluster: `ray.init` and actor creation are stood in for. On a real cluster:
tests/ray/test_ray_cluster.py."""

import asyncio
import os

import pytest
import ray

from teola import Engine
from teola.runtime.executors.ray import RayExecutor
from teola.runtime.executors.ray_actor import EngineActor, SecretsMissing
from teola.runtime.executors.ray_env import is_secret_name, secrets_for, split_options, worker_env
from tests.support.env_probe import PROBE

SIM = "engines.sim.sim_engine:SimEngine"
DSN = "postgresql://teola:hunter2@db/teola"
SECRETS = {
    "TEOLA_SECRET": "signing-secret",
    "TEOLA_API_KEYS": "tenant-a:key-a",
    "TEOLA_PG_DSN": DSN,
    "HF_TOKEN": "hf_token_value",
    "VLLM_API_KEY": "vllm-key",
    "AWS_SECRET_ACCESS_KEY": "aws",
}
SETTINGS = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "OMP_NUM_THREADS": "2",
    "TEOLA_CACHE_DIR": "/cache",
    "HF_HOME": "/cache/hf",
    "TOKENIZERS_PARALLELISM": "false",
}


@pytest.fixture
def environ(monkeypatch):
    for k, v in {**SECRETS, **SETTINGS, "TEOLA_QUERY_TIMEOUT": "30", "UNRELATED": "x"}.items():
        monkeypatch.setenv(k, v)


@pytest.fixture
def no_cluster(monkeypatch):
    """An EngineActor run in this process asks the runtime context for its node: a made-up one."""
    context = type("Context", (), {"get_node_id": lambda self: "node-1"})()
    monkeypatch.setattr(ray, "get_runtime_context", lambda: context)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)


def init_kwargs(monkeypatch, executor: RayExecutor) -> dict:
    """The keywords `executor` gives `ray.init`."""
    seen = {}
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: seen.update(kw))
    executor._init()
    return seen


def test_the_job_runtime_env_holds_the_engine_settings_and_no_secret(monkeypatch, environ):
    env = init_kwargs(monkeypatch, RayExecutor())["runtime_env"]["env_vars"]
    leaked = [k for k, v in env.items() if k in SECRETS or any(s in v for s in SECRETS.values())]
    assert leaked == []
    assert {k: env.get(k) for k in SETTINGS} == SETTINGS
    assert "PYTHONPATH" in env
    assert "TEOLA_QUERY_TIMEOUT" not in env and "UNRELATED" not in env  # an allow-list, not a deny-list


def test_forward_env_adds_names_but_never_a_secret(monkeypatch, environ):
    env = init_kwargs(monkeypatch, RayExecutor(forward_env=["UNRELATED"]))["runtime_env"]["env_vars"]
    assert env["UNRELATED"] == "x"
    with pytest.raises(ValueError, match="secret_env"):
        RayExecutor(forward_env=["HF_TOKEN"])
    assert worker_env({"VLLM_API_KEY": "k", "VLLM_X": "1"}, ("TEOLA_SECRET",)) == {"VLLM_X": "1"}
    assert is_secret_name("TEOLA_PG_DSN") and not is_secret_name("TOKENIZERS_PARALLELISM")


def test_each_engine_gets_only_the_secrets_its_kind_reads(environ):
    assert secrets_for("vectordb", "pgvector", os.environ, {}, {})["env"] == {"TEOLA_PG_DSN": DSN}
    assert secrets_for("llm", "vllm", os.environ, {}, {})["env"] == {"HF_TOKEN": "hf_token_value"}
    assert secrets_for("llm", SIM, os.environ, {}, {})["env"] == {}
    extra = {"probe": ("TEOLA_API_KEYS",)}
    assert secrets_for("probe", SIM, os.environ, extra, {})["env"] == {"TEOLA_API_KEYS": "tenant-a:key-a"}
    with pytest.raises(ValueError, match="secret_env"):
        RayExecutor(secret_env={"pgvector": "TEOLA_PG_DSN"})
    assert split_options({"dsn": DSN, "api_key": "k", "dim": 8}) == ({"dim": 8}, {"dsn": DSN, "api_key": "k"})


class FakeActor:
    """Stands in for `ray.remote(EngineActor).options(...).remote(...)`: records the constructor
    arguments and answers `acquire` from a real in-process EngineActor."""

    def __init__(self, args):
        self.actor = EngineActor(*args)
        self.acquire = type("M", (), {"remote": lambda _, secrets: self.actor.acquire(secrets)})()


async def test_credentials_travel_by_actor_call_not_in_constructor_arguments(
    monkeypatch, environ, no_cluster
):
    created = []

    def create(self, plan):
        created.append(plan)
        return FakeActor(plan.args)

    monkeypatch.setattr(RayExecutor, "_create", create)
    ex = RayExecutor(secret_env={"probe": ["HF_TOKEN"]})
    inst = await ex.launch(
        Engine("probe", kind=PROBE, ops=["embedding"], dsn=DSN, api_key="sk-1", dim=8), 0, None
    )
    (plan,) = created
    assert (
        "hunter2" not in repr(plan.args)
        and "sk-1" not in repr(plan.args)
        and "hunter2" not in repr(plan.options)
    )
    assert plan.args[2] == {"dim": 8}
    (seen,) = await inst.handle.actor.execute("embedding", [{"text": "HF_TOKEN"}])  # delivered by `acquire`
    assert seen == {"env": "hf_token_value", "options": {"dim": 8, "dsn": DSN, "api_key": "sk-1"}}


async def test_a_sealed_actor_builds_no_engine_before_its_secrets_come(monkeypatch, no_cluster):
    monkeypatch.setenv("TEOLA_PG_DSN", "not given yet")
    actor = EngineActor("vectordb", PROBE, {}, None, True)  # as Ray restarts it: no secrets
    with pytest.raises(SecretsMissing):
        await actor.execute("embedding", [{"text": "TEOLA_PG_DSN"}])
    assert actor.backend is None
    await actor.acquire({"env": {"TEOLA_PG_DSN": DSN}, "options": {"dsn": DSN}})
    assert await actor.execute("embedding", [{"text": "TEOLA_PG_DSN"}]) == [
        {"env": DSN, "options": {"dsn": DSN}}
    ]
    await asyncio.wait_for(actor.release(), 5)
